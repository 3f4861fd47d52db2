#include "runnel/placement/placer.hpp"

#include <map>
#include <numeric>
#include <unordered_map>

#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {
namespace {

struct union_find {
  std::vector<int> parent;
  explicit union_find(int n) : parent(size_t(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[size_t(x)] != x) {
      parent[size_t(x)] = parent[size_t(parent[size_t(x)])];
      x = parent[size_t(x)];
    }
    return x;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b)
      parent[size_t(std::max(a, b))] = std::min(a, b);
  }
};

/// Ops whose output names a device resource that consumers look up on their own device.
bool holds_resource(const std::string& op) {
  return op == "VariableV2" || op == "FIFOQueueV2" || op == "RandomShuffleQueueV2" ||
         op == "PaddingFIFOQueueV2" || op == "PriorityQueueV2" ||
         op == "ConditionalAccumulator" || op == "SparseConditionalAccumulator";
}

/// A group of integer or string constants alone (shapes, axes): such a constant has a GPU kernel
/// whose output stays in host memory, for when it is colocated with GPU nodes; alone it stays
/// beside its consumers on a CPU rather than adding a transfer (TensorFlow's placer puts such
/// "generators" with their consumers).
bool host_constants_only(const graph& g, const std::vector<int>& ids) {
  for (int v : ids) {
    const node& n = g.at(v);
    if (n.op != "Const" || n.output_types.empty() || is_floating(n.output_types[0]))
      return false;
  }
  return true;
}

} // namespace

bool any_kernel(const node&, const std::string&) {
  return true;
}

std::vector<placement_device> placement_devices_from(const std::vector<std::string>& names) {
  std::vector<placement_device> out;
  for (auto& n : names)
    out.push_back({n, device_spec::parse(n).value()});
  return out;
}

std::vector<placement_device> local_cpu_devices(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i)
    names.push_back("/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i));
  return placement_devices_from(names);
}

std::vector<int> all_nodes(const graph& g) {
  std::vector<int> v(size_t(g.num_nodes()));
  for (int i = 0; i < g.num_nodes(); ++i)
    v[size_t(i)] = i;
  return v;
}

std::vector<int> colocation_groups(const graph& g, const std::vector<int>& nodes) {
  union_find uf(g.num_nodes());
  for (int v : nodes) {
    const node& n = g.at(v);
    for (auto& name : n.colocation)
      if (auto other = g.find(name))
        uf.unite(v, *other);
    // A stateful op stays with the variables it updates (its ref inputs), and every consumer of
    // a variable or queue with it: consumers find the resource on their own device.
    auto refs = ref_input_slots(n);
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if ((i < refs.size() && refs[i]) || holds_resource(g.at(n.inputs[i].node).op))
        uf.unite(v, n.inputs[i].node);
  }
  std::vector<int> out;
  out.reserve(nodes.size());
  for (int v : nodes)
    out.push_back(uf.find(v));
  return out;
}

result<placement_constraints> resolve_constraints(const graph& g, const std::vector<int>& nodes,
                                                  const std::vector<placement_device>& devices,
                                                  const kernel_check& has_kernel,
                                                  const placement_options& options) {
  if (devices.empty())
    return failed_precondition("no devices to place on");
  placement_constraints out;
  out.group_of = colocation_groups(g, nodes);
  std::map<int, std::vector<int>> members; // group -> node ids, in id order
  for (size_t i = 0; i < nodes.size(); ++i)
    members[out.group_of[i]].push_back(nodes[i]);

  for (auto& member : members) {
    int group = member.first;
    auto& ids = member.second;
    auto group_names = [&, &ids = ids] {
      std::string s;
      for (int v : ids)
        s += (s.empty() ? "" : ", ") + g.at(v).name;
      return s;
    };
    auto considered = [&] {
      std::string s;
      for (auto& d : devices)
        s += (s.empty() ? "" : ", ") + d.name;
      return s;
    };
    // The group's spec: every member's, merged.
    device_spec spec;
    for (int v : ids) {
      const node& n = g.at(v);
      auto own = device_spec::parse(n.device);
      if (!own)
        return own.error().with_context("node '" + n.name + "' (op " + n.op + ")");
      auto merged = device_spec::merge(*own, spec, options.allow_soft_placement);
      if (!merged)
        return merged.error().with_context("node '" + n.name + "' (op " + n.op +
                                           ") in colocation group [" + group_names() + "]");
      spec = *merged;
    }
    auto kernels_ok = [&](const placement_device& d) {
      for (int v : ids)
        if (!has_kernel(g.at(v), *d.spec.type))
          return false;
      return true;
    };
    std::vector<size_t> feasible;
    for (size_t d = 0; d < devices.size(); ++d)
      if (spec.matches(devices[d].spec) && kernels_ok(devices[d]))
        feasible.push_back(d);
    if (options.prefer_gpu && !spec.type && !host_constants_only(g, ids)) {
      auto gpu = std::find_if(feasible.begin(), feasible.end(),
                              [&](size_t d) { return devices[d].spec.type == "GPU"; });
      if (gpu != feasible.end())
        feasible = {*gpu};
    }
    if (feasible.empty() && options.allow_soft_placement) {
      // Relax the device type and id; keep job, replica and task.
      device_spec relaxed = spec;
      relaxed.type.reset();
      relaxed.id.reset();
      for (size_t d = 0; d < devices.size(); ++d)
        if (relaxed.matches(devices[d].spec) && kernels_ok(devices[d]))
          feasible.push_back(d);
    }
    if (feasible.empty()) {
      const node& first = g.at(ids.front());
      std::string kernels;
      for (auto& d : devices)
        if (spec.matches(d.spec))
          for (int v : ids)
            if (!has_kernel(g.at(v), *d.spec.type))
              kernels = "; node '" + g.at(v).name + "' (op " + g.at(v).op + ") has no " +
                        *d.spec.type + " kernel";
      std::string gpu_note = spec.type == "GPU" && !options.no_gpu_reason.empty()
                                 ? "; " + options.no_gpu_reason
                                 : "";
      return invalid_argument("cannot place node '" + first.name + "' (op " + first.op +
                              "): device spec '" + spec.to_string() + "' of colocation group [" +
                              group_names() + "] matches no usable device among: " +
                              considered() + kernels + gpu_note +
                              (options.allow_soft_placement ? "" : " (soft placement is off)"));
    }
    out.feasible[group] = std::move(feasible);
  }
  return out;
}

result<std::vector<size_t>> place_simple(const graph& g, const std::vector<int>& nodes,
                                         const std::vector<placement_device>& devices,
                                         const kernel_check& has_kernel,
                                         const placement_options& options) {
  RUNNEL_ASSIGN_OR_RETURN(auto c, resolve_constraints(g, nodes, devices, has_kernel, options));
  std::vector<size_t> out;
  out.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    out.push_back(c.feasible.at(c.group_of[i]).front());
  return out;
}

} // namespace runnel
