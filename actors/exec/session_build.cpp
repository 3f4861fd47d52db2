// Building an executor instance for a signature (feeds, fetches, targets): placement, the graph
// optimizer, pruning, and then instantiate (instantiate.cpp).
#include <cstdio>
#include <map>

#include "runnel/actors/exec/session_impl.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"
#include "runnel/placement/cost_model.hpp"
#include "runnel/placement/partition.hpp"
#include "runnel/placement/placer.hpp"
#include "runnel/placement/prune.hpp"

namespace runnel {
namespace {

/// The runtime's devices for the placer, in priority order.
std::vector<placement_device> placement_devices(const runtime::impl& rt) {
  std::vector<std::string> names;
  for (auto& d : rt.devices)
    names.push_back(d.name);
  return placement_devices_from(names);
}

} // namespace

status session::impl::place_graph() {
  int n = g.num_nodes();
  if (size_t(n) == device_of_node.size())
    return {};
  auto all = all_nodes(g);
  // GPUs take the ops that have GPU kernels, except in graphs with loops and conditionals: their
  // edges between devices are direct messages, with no transfer, so they stay on CPUs
  // (docs/gpu.md).
  bool control_flow = false;
  for (int v = 0; v < n && !control_flow; ++v)
    control_flow = is_control_flow_op(g.at(v).op);
  auto& kernels = runtime_kernels();
  auto has_kernel = [&](const node& nd, const std::string& type) {
    if (type == "GPU")
      return !control_flow && kernels.has_kernel(nd, device_type::gpu);
    return kernels.has_kernel(nd, device_type::cpu);
  };
  auto devices = placement_devices(rt);
  placement_options popts{
      .allow_soft_placement = options.allow_soft_placement,
      .no_gpu_reason = control_flow && rt.no_gpu_reason.empty()
                           ? "graphs with loops and conditionals run on CPUs only (docs/gpu.md)"
                           : rt.no_gpu_reason,
      .prefer_gpu = !control_flow};
  std::vector<size_t> where;
  if (options.placement == session_options::placement_policy::cost_model) {
    std::vector<device_params> params(devices.size(), resolve_cpu_params(rt));
    link_params links;
    for (size_t d = 0; d < devices.size(); ++d) {
      auto& dev = rt.devices[d];
      if (!dev.gpu)
        continue;
      auto& speed = resolve_gpu_throughput(dev); // measured on first use
      if (speed.flops_per_s > 0) {
        params[d].flops_per_s = speed.flops_per_s;
        params[d].bytes_per_s = speed.bytes_per_s;
        // No cache rate of its own, and its special-function units keep exp and tanh bound by
        // memory: the CPU's figures for both would only mislead.
        params[d].cache_bytes_per_s = speed.bytes_per_s;
        params[d].transcendental_per_s = speed.flops_per_s;
        links.host_device_bytes_per_s =
            std::min(links.host_device_bytes_per_s, speed.host_link_bytes_per_s);
      }
      params[d].memory_bytes = int64_t(dev.gpu->memory_stats().bytes_limit);
    }
    std::lock_guard costs_lock(shared_costs_mu);
    cost_model estimates_only;
    const cost_model& costs = options.costs ? *options.costs : estimates_only;
    RUNNEL_ASSIGN_OR_RETURN(auto p,
                            place_greedy(g, all, devices, params, costs, has_kernel, popts, links));
    if (options.trace_placement)
      std::fprintf(stderr, "%s", p.explain(g, all, devices).c_str());
    where = std::move(p.device);
  } else {
    RUNNEL_ASSIGN_OR_RETURN(where, place_simple(g, all, devices, has_kernel, popts));
  }
  size_t old = device_of_node.size();
  if (old > 0) {
    auto groups = colocation_groups(g, all);
    std::unordered_map<int, size_t> kept;
    for (size_t v = 0; v < old; ++v) {
      where[v] = device_of_node[v];
      kept.emplace(groups[v], device_of_node[v]);
    }
    for (size_t v = old; v < where.size(); ++v)
      if (auto it = kept.find(groups[v]); it != kept.end())
        where[v] = it->second;
  }
  device_of_node = std::move(where);
  // A graph that asks for a GPU where there is none (soft placement moved it to a CPU) is where
  // the reason matters: said once per process, with the first such node.
  if (!rt.no_gpu_reason.empty() && options.allow_soft_placement) {
    static std::once_flag said;
    for (int v = 0; v < n; ++v) {
      auto spec = device_spec::parse(g.at(v).device);
      if (spec.ok() && spec->type == "GPU") {
        std::call_once(said, [&] {
          std::fprintf(stderr,
                       "runnel: node '%s' asks for %s, but %s: it runs on a CPU (soft "
                       "placement)\n",
                       g.at(v).name.c_str(), g.at(v).device.c_str(), rt.no_gpu_reason.c_str());
        });
        break;
      }
    }
  }
  return {};
}

result<std::shared_ptr<instance>> session::impl::build(const std::vector<endpoint>& feeds,
                                                       const std::vector<endpoint>& fetches,
                                                       const std::vector<int>& targets) {
  int n = g.num_nodes();
  auto is_fed = [&](endpoint e) { return std::find(feeds.begin(), feeds.end(), e) != feeds.end(); };
  // Prune: walk back from fetches and targets, stopping at fed tensors.
  std::vector<int> roots(targets.begin(), targets.end());
  for (auto e : fetches)
    if (!is_fed(e))
      roots.push_back(e.node);
  std::vector<char> needed = prune(g, roots, feeds);
  // A needed placeholder must be fed.
  for (int v = 0; v < n; ++v)
    if (needed[size_t(v)] && g.at(v).op == "Placeholder") {
      auto& p = g.at(v);
      return invalid_argument("you must feed a value for placeholder '" + p.name + "' with dtype " +
                              std::string(name(p.output_types[0])) + " and shape " +
                              p.output_shapes[0].to_string());
    }

  RUNNEL_RETURN_IF_ERROR(place_graph());
  if (optimizer.any()) {
    graph_optimizer_context context{.kernels = &runtime_kernels(),
                                    .cpu = rt.devices.front().cpu.get()};
    context.device_of_node.reserve(device_of_node.size());
    for (size_t d : device_of_node)
      context.device_of_node.push_back(rt.devices[d].name);
    RUNNEL_ASSIGN_OR_RETURN(
        auto og, optimize_graph(g, needed, {feeds, fetches, targets}, optimizer, context));
    // Nothing rewritten (the summary is the only line): the source graph runs as it is.
    if (og.removed == 0 && og.changes.size() == 1)
      return instantiate(g, device_of_node, feeds, fetches, targets, needed);
    std::vector<size_t> where;
    for (int o : og.origin)
      where.push_back(device_of_node[size_t(o)]);
    auto& sig = og.signature;
    // Pruned again: a fed tensor's stand-in Placeholder is no node of the instance.
    std::vector<int> og_roots(sig.targets.begin(), sig.targets.end());
    for (auto e : sig.fetches)
      if (std::find(sig.feeds.begin(), sig.feeds.end(), e) == sig.feeds.end())
        og_roots.push_back(e.node);
    RUNNEL_ASSIGN_OR_RETURN(auto inst, instantiate(*og.g, where, sig.feeds, sig.fetches,
                                                   sig.targets, prune(*og.g, og_roots, sig.feeds)));
    inst->optimized = std::move(og.g);
    return inst;
  }
  return instantiate(g, device_of_node, feeds, fetches, targets, needed);
}

} // namespace runnel
