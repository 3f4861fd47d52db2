// Constant folding: a node whose inputs are all constants is computed once, now, by its CPU
// kernel, and becomes a Const; so is a Shape whose input's shape is fully known. Stateful nodes,
// control flow, nodes that wait on others, nodes placed on GPUs (their kernels compute them; the
// CPU kernels here are what those are checked against) and results over the size bound stay; a
// kernel that fails leaves its node as it is (the step reports the error, as without folding).
#include "runnel/ops/core/float_env.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel::optimize {
namespace {

/// The outputs of `n` computed by its CPU kernel on `inputs`, or nothing when it cannot be.
std::optional<std::vector<tensor>> evaluate(const rgraph& r, const rnode& n,
                                            const std::vector<tensor>& inputs, cpu_device* cpu) {
  graph tmp(r.source->ops());
  node_def def{.name = n.name, .op = n.op, .inputs = {}, .device = "", .attrs = n.attrs};
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string in = "_folding_input_" + std::to_string(i);
    if (!tmp.add_node({.name = in,
                       .op = "Const",
                       .inputs = {},
                       .device = "",
                       .attrs = {{"dtype", inputs[i].type()}, {"value", inputs[i]}}}))
      return std::nullopt;
    def.inputs.push_back(in);
  }
  auto id = tmp.add_node(def);
  if (!id)
    return std::nullopt;
  const node& tn = tmp.at(*id);
  auto factory = r.context->kernels->find(tn, device_type::cpu);
  if (!factory)
    return std::nullopt;
  kernel_construction c{tn,     tmp,     device_type::cpu,
                        cpu,    nullptr, std::vector<bool>(tn.output_types.size(), true),
                        nullptr};
  auto k = (**factory)(c);
  if (!k || (*k)->is_async())
    return std::nullopt;
  kernel_context ctx(inputs, tn.num_outputs(), cpu);
  scoped_flush_denormals flush; // a folded constant is what the executor would have computed
  if (!(*k)->compute(ctx).ok())
    return std::nullopt;
  int64_t bytes = 0;
  for (int i = 0; i < tn.num_outputs(); ++i) {
    const tensor& t = ctx.output(i);
    if (!t.valid() || t.type() != tn.output_types[size_t(i)] ||
        !t.shape().is_compatible_with(tn.output_shapes[size_t(i)]))
      return std::nullopt;
    bytes += int64_t(t.bytes());
  }
  if (bytes > r.opts->max_folded_bytes)
    return std::nullopt;
  return std::move(ctx.outputs());
}

/// A Shape of a fully known shape, or nothing.
std::optional<tensor> known_shape(const rgraph& r, const rnode& n) {
  if (n.op != "Shape" || n.inputs.size() != 1)
    return std::nullopt;
  auto in = n.inputs[0];
  const shape& s = r.nodes[size_t(in.node)].shapes[size_t(in.index)];
  // A stateful producer's static shape is a promise it need not keep (a variable assigned with
  // validate_shape=false, a dequeue).
  const op_def* producer = r.source->ops().find(r.nodes[size_t(in.node)].op);
  if (!s.is_fully_defined() || !producer || producer->stateful)
    return std::nullopt;
  tensor t(n.types[0], shape{s.rank()});
  for (int i = 0; i < s.rank(); ++i) {
    if (n.types[0] == dtype::i32)
      t.data<int32_t>()[i] = int32_t(s.dim(i));
    else
      t.data<int64_t>()[i] = s.dim(i);
  }
  return t;
}

bool small_enough(const rgraph& r, const rnode& n) {
  int64_t bytes = 0;
  for (size_t i = 0; i < n.types.size(); ++i) {
    if (!n.shapes[i].is_fully_defined())
      return true; // known after computing
    bytes += n.shapes[i].num_elements() * int64_t(size_of(n.types[i]));
  }
  return bytes <= r.opts->max_folded_bytes;
}

} // namespace

status fold_constants(rgraph& r) {
  // Kernels expect a device; without the runtime's, one with no pool (the calling thread).
  std::unique_ptr<cpu_device> own;
  cpu_device* cpu = r.context->cpu;
  if (!cpu) {
    own = std::make_unique<cpu_device>(0);
    cpu = own.get();
  }
  auto data = r.consumers();
  int folded = 0;
  for (int v : r.topo_order()) {
    rnode& n = r.nodes[size_t(v)];
    if (n.op == "Const" || n.inputs.empty() || !n.control_inputs.empty() || r.is_stateful(v) ||
        is_control_flow_op(n.op) || r.is_fed(v) || !small_enough(r, n) || !r.on_cpu(v))
      continue;
    bool targeted = false;
    for (int t : r.signature.targets)
      targeted |= t == v;
    if (targeted)
      continue;
    std::vector<tensor> values;
    // A shape folded in a graph with loops or conditionals keeps waiting on the tensor it
    // describes: that keeps it in the tensor's frame and branch (a Const waiting on nothing runs
    // at the top level, in every branch). Values of constants run everywhere anyway.
    // (Waiting on a Switch runs in both branches: the shape of a Switch's output stays.)
    std::vector<int> anchor;
    if (auto s = known_shape(r, n)) {
      if (r.control_flow && r.nodes[size_t(n.inputs[0].node)].op == "Switch")
        continue;
      values.push_back(std::move(*s));
      int of = n.inputs[0].node;
      if (r.control_flow && !r.is_fed(of)) // a fed value is a top-level one, and never runs
        anchor.push_back(of);
    } else {
      std::vector<tensor> inputs;
      for (auto e : n.inputs) {
        const tensor* c = r.constant(e.node);
        if (!c)
          break;
        inputs.push_back(*c);
      }
      if (inputs.size() != n.inputs.size())
        continue;
      auto out = evaluate(r, n, inputs, cpu);
      if (!out)
        continue;
      values = std::move(*out);
    }
    auto as_const = [&anchor](rnode& c, tensor value) {
      c.op = "Const";
      c.inputs.clear();
      c.control_inputs = anchor;
      c.attrs = {{"dtype", value.type()}, {"value", value}};
      c.types = {value.type()};
      c.shapes = {value.shape()};
    };
    if (values.size() == 1) { // in place: it keeps its name, so a fetch of it still finds it
      as_const(n, std::move(values[0]));
    } else {
      const rnode source = n; // nodes grows below
      for (size_t i = 0; i < values.size(); ++i) {
        rnode c{.origin = source.origin,
                .name = source.name + "/_folded_" + std::to_string(i),
                .device = source.device,
                .frame = source.frame};
        as_const(c, std::move(values[i]));
        int id = int(r.nodes.size());
        r.nodes.push_back(std::move(c));
        r.fed.push_back(0);
        data.emplace_back();
        r.replace_uses({v, int(i)}, {id, 0}, data);
      }
      if (!r.is_kept(v))
        r.kill(v);
    }
    ++folded;
  }
  if (folded > 0) {
    int before = r.removed;
    r.remove_unused();
    r.note("folded " + std::to_string(folded) + " nodes into constants (" +
           std::to_string(r.removed - before) + " inputs no longer needed)");
  }
  return {};
}

} // namespace runnel::optimize
