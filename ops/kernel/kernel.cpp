#include "runnel/ops/kernel/kernel.hpp"

#include <algorithm>

namespace runnel {

result<std::shared_ptr<queue_resource>>
resource_manager::find_or_create_queue(const std::string& name, const queue_spec&) {
  return unimplemented("queue '" + name + "': this runtime has no queues");
}

result<std::shared_ptr<accumulator_resource>>
resource_manager::find_or_create_accumulator(const std::string& name, const accumulator_spec&) {
  return unimplemented("accumulator '" + name + "': this runtime has no gradient accumulators");
}

result<std::shared_ptr<iterator_resource>>
resource_manager::find_or_create_iterator(const std::string& name) {
  return unimplemented("iterator '" + name + "': this runtime has no dataset iterators");
}

const char* to_string(device_type t) {
  return t == device_type::cpu ? "CPU" : "GPU";
}

tensor& kernel_context::forward_or_allocate_output(int i, int in, dtype t, const shape& s) {
  const tensor& x = inputs_[size_t(in)];
  if (x.type() == t && x.shape() == s && x.is_unique() && t != dtype::string) {
    outputs_[size_t(i)] = x; // shares the buffer; the runtime drops its input reference after
    return outputs_[size_t(i)];
  }
  return allocate_output(i, t, s);
}

void kernel_registry::add(const std::string& op, device_type device, std::vector<dtype> types,
                          kernel_factory factory, std::string type_attr) {
  kernels_[op].push_back({device, std::move(types), std::move(type_attr), std::move(factory)});
}

std::vector<kernel_registry::registration> kernel_registry::registrations() const {
  std::vector<registration> out;
  for (auto& [op, entries] : kernels_)
    for (auto& e : entries)
      out.push_back({op, e.device, e.types, e.type_attr, e.factory});
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.op < b.op; });
  return out;
}

result<const kernel_factory*> kernel_registry::find(const node& n, device_type device) const {
  auto it = kernels_.find(n.op);
  std::string context = "node '" + n.name + "' (op " + n.op + ")";
  if (it == kernels_.end())
    return not_found(context + ": no kernel is registered for op " + n.op);
  std::string type_desc;
  for (auto& e : it->second) {
    if (e.device != device)
      continue;
    if (e.types.empty())
      return &e.factory;
    auto a = n.attrs.find(e.type_attr);
    if (a == n.attrs.end())
      continue;
    auto* t = std::get_if<dtype>(&a->second);
    if (!t)
      continue;
    type_desc = e.type_attr + "=" + std::string(name(*t));
    if (std::find(e.types.begin(), e.types.end(), *t) != e.types.end())
      return &e.factory;
  }
  return not_found(context + ": no " + to_string(device) + " kernel for " +
                   (type_desc.empty() ? "this node" : type_desc));
}

std::vector<bool> ref_input_slots(const node& n) {
  std::vector<bool> out;
  for (auto& arg : n.def->inputs) {
    int64_t count = arg.count(n.attrs);
    for (int64_t j = 0; j < count; ++j)
      out.push_back(arg.is_ref);
  }
  out.resize(n.inputs.size(), false);
  return out;
}

result<std::shared_ptr<variable>> node_variable(const kernel_construction& c, const node& v) {
  if (v.op != "VariableV2")
    return invalid_argument("'" + v.name + "' (op " + v.op + ") is not a variable");
  if (!c.resources)
    return failed_precondition("no resource manager: variables need a runtime");
  return c.resources->find_or_create_variable(variable_resource_name(v),
                                              get_attr<dtype>(v.attrs, "dtype"),
                                              get_attr<shape>(v.attrs, "shape"));
}

result<std::shared_ptr<variable>> input_variable(const kernel_construction& c, int input) {
  auto& v = c.graph.at(c.node.inputs[size_t(input)].node);
  auto r = node_variable(c, v);
  if (!r)
    return r.error().with_context("input " + std::to_string(input));
  return r;
}

} // namespace runnel
