#include "runnel/placement/cost_model.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <queue>
#include <set>
#include <unordered_map>

namespace runnel {
namespace {

double elements(const shape& s, int64_t unknown) {
  if (!s.has_known_rank())
    return double(unknown);
  double n = 1;
  for (auto d : s.dims())
    n *= double(d < 0 ? unknown : d);
  return n;
}

double dim_or(const shape& s, int i, int64_t unknown) {
  if (!s.has_known_rank() || i >= s.rank() || s[i] < 0)
    return double(unknown);
  return double(s[i]);
}

bool same_process(const device_spec& a, const device_spec& b) {
  return a.job == b.job && a.replica == b.replica && a.task == b.task;
}

} // namespace

double cost_model::flops(const graph& g, const node& n) const {
  auto in_shape = [&](size_t i) -> shape {
    if (i >= n.inputs.size())
      return shape::unknown();
    auto e = n.inputs[i];
    return g.at(e.node).output_shapes[size_t(e.index)];
  };
  if (n.op == "MatMul" || n.op == "BatchMatMul" || n.op == "BatchMatMulV2") {
    shape a = in_shape(0), b = in_shape(1);
    bool ta = false, tb = false;
    if (auto t = find_attr<bool>(n.attrs, n.op == "MatMul" ? "transpose_a" : "adj_x"))
      ta = *t;
    if (auto t = find_attr<bool>(n.attrs, n.op == "MatMul" ? "transpose_b" : "adj_y"))
      tb = *t;
    int ra = a.has_known_rank() ? a.rank() : 2, rb = b.has_known_rank() ? b.rank() : 2;
    double m = dim_or(a, ta ? ra - 1 : ra - 2, unknown_dim);
    double k = dim_or(a, ta ? ra - 2 : ra - 1, unknown_dim);
    double nn = dim_or(b, tb ? rb - 2 : rb - 1, unknown_dim);
    double batch = 1;
    for (int i = 0; i < ra - 2; ++i)
      batch *= dim_or(a, i, unknown_dim);
    return 2 * batch * m * k * nn;
  }
  if (n.op == "Conv2D" && !n.output_shapes.empty()) {
    shape f = in_shape(1); // [kh, kw, in, out]
    return 2 * elements(n.output_shapes[0], unknown_dim) * dim_or(f, 0, unknown_dim) *
           dim_or(f, 1, unknown_dim) * dim_or(f, 2, unknown_dim);
  }
  double out = 0;
  for (auto& s : n.output_shapes)
    out += elements(s, unknown_dim);
  if (n.op == "_FusedElementwise") // one flop an element for each op of its program
    if (auto program = find_attr<std::vector<std::string>>(n.attrs, "ops"))
      out *= double(std::max<size_t>(1, program->size()));
  return out;
}

int64_t cost_model::output_bytes(const node& n) const {
  int64_t total = 0;
  for (size_t i = 0; i < n.output_shapes.size(); ++i) {
    auto& s = n.output_shapes[i];
    if (s.is_fully_defined())
      total += s.num_elements() * int64_t(size_of(n.output_types[i]));
    else
      total += int64_t(elements(s, unknown_dim)) * int64_t(size_of(n.output_types[i]));
  }
  return total;
}

double cost_model::bytes_touched(const graph& g, const node& n) const {
  double bytes = double(output_bytes(n));
  for (auto e : n.inputs) {
    auto& p = g.at(e.node);
    bytes += elements(p.output_shapes[size_t(e.index)], unknown_dim) *
             double(size_of(p.output_types[size_t(e.index)]));
  }
  return bytes;
}

double cost_model::transcendental_elements(const node& n) const {
  // One exp, log, tanh or the like per output element (Softmax: one exp per input element).
  static const std::set<std::string, std::less<>> ops{
      "Exp",  "Expm1", "Log",  "Log1p", "Tanh",    "Sigmoid",    "Softplus", "Elu",
      "Selu", "Erf",   "Erfc", "Sin",   "Cos",     "Tan",        "Asin",     "Acos",
      "Atan", "Sinh",  "Cosh", "Pow",   "Softmax", "LogSoftmax", "Lgamma",   "Digamma"};
  if (n.output_shapes.empty())
    return 0;
  if (n.op == "_FusedElementwise") {
    // One per output element for each such op of the fused program (the optimizer's fusion of
    // `tanh(a + b)` costs what its Tanh did, not what one pass over its bytes does).
    double count = 0;
    if (auto program = find_attr<std::vector<std::string>>(n.attrs, "ops"))
      for (auto& op : *program)
        count += double(ops.count(op));
    return count * elements(n.output_shapes[0], unknown_dim);
  }
  if (!ops.count(n.op))
    return 0;
  return elements(n.output_shapes[0], unknown_dim);
}

double cost_model::compute_seconds(const graph& g, const node& n, const std::string& type,
                                   const device_params& p) const {
  auto it = measured_.find({n.name, type});
  if (it != measured_.end())
    return it->second;
  double bytes = bytes_touched(g, n);
  double bandwidth =
      bytes <= double(p.cache_bytes) ? std::max(p.cache_bytes_per_s, p.bytes_per_s) : p.bytes_per_s;
  return p.node_overhead_s + std::max({flops(g, n) / p.flops_per_s, bytes / bandwidth,
                                       transcendental_elements(n) / p.transcendental_per_s});
}

void cost_model::record(const std::string& node_name, const std::string& device_type,
                        double seconds) {
  measured_[{node_name, device_type}] = seconds;
}

bool cost_model::has_measurement(const std::string& node_name,
                                 const std::string& device_type) const {
  return measured_.count({node_name, device_type}) > 0;
}

namespace {

double transfer_seconds(const placement_device& from, const placement_device& to, int64_t bytes,
                        const link_params& links) {
  if (&from == &to)
    return 0;
  if (same_process(from.spec, to.spec)) {
    int gpus = int(from.spec.type == "GPU") + int(to.spec.type == "GPU");
    return links.same_process_latency_s + gpus * double(bytes) / links.host_device_bytes_per_s;
  }
  return links.other_process_latency_s + double(bytes) / links.other_process_bytes_per_s;
}

} // namespace

result<greedy_placement> place_greedy(const graph& g, const std::vector<int>& nodes,
                                      const std::vector<placement_device>& devices,
                                      const std::vector<device_params>& params,
                                      const cost_model& costs, const kernel_check& has_kernel,
                                      const placement_options& options, const link_params& links) {
  if (params.size() != devices.size())
    return invalid_argument("place_greedy: " + std::to_string(params.size()) +
                            " device parameter sets for " + std::to_string(devices.size()) +
                            " devices");
  RUNNEL_ASSIGN_OR_RETURN(auto c, resolve_constraints(g, nodes, devices, has_kernel, options));
  greedy_placement out;
  size_t count = nodes.size();
  out.device.assign(count, 0);
  out.start_s.assign(count, 0);
  out.finish_s.assign(count, 0);
  out.why.assign(count, "");
  std::unordered_map<int, size_t> index_of; // node id -> position in `nodes`
  for (size_t i = 0; i < count; ++i)
    index_of[nodes[i]] = i;
  std::unordered_map<int, size_t> group_device;
  std::vector<double> free_at(devices.size(), 0);
  std::vector<int64_t> memory_used(devices.size(), 0);

  for (size_t i = 0; i < count; ++i) {
    const node& n = g.at(nodes[i]);
    int group = c.group_of[i];
    // When each input is ready on device d.
    auto ready_on = [&](size_t d) {
      double ready = 0;
      for (auto e : n.inputs) {
        auto it = index_of.find(e.node);
        if (it == index_of.end())
          continue; // fed or bound: available everywhere at the start
        size_t j = it->second;
        int64_t bytes = costs.output_bytes(g.at(e.node));
        ready = std::max(ready, out.finish_s[j] + transfer_seconds(devices[out.device[j]],
                                                                  devices[d], bytes, links));
      }
      for (int ctl : n.control_inputs)
        if (auto it = index_of.find(ctl); it != index_of.end())
          ready = std::max(ready, out.finish_s[it->second]);
      return ready;
    };
    auto finish_on = [&](size_t d, double& start) {
      start = std::max(free_at[d], ready_on(d));
      return start + costs.compute_seconds(g, n, *devices[d].spec.type, params[d]);
    };
    int64_t bytes = costs.output_bytes(n);
    size_t chosen;
    std::string why;
    if (auto it = group_device.find(group); it != group_device.end()) {
      chosen = it->second;
      why = "colocated with its group";
    } else {
      const auto& feasible = c.feasible.at(group);
      double best = std::numeric_limits<double>::infinity();
      chosen = feasible.front();
      std::string alternatives;
      for (size_t d : feasible) {
        if (params[d].memory_bytes > 0 && memory_used[d] + bytes > params[d].memory_bytes) {
          alternatives += " " + devices[d].name + ": out of memory;";
          continue;
        }
        double start;
        double f = finish_on(d, start);
        char buf[160];
        std::snprintf(buf, sizeof buf, " %s: %.1f us;", devices[d].name.c_str(), f * 1e6);
        alternatives += buf;
        if (f < best) {
          best = f;
          chosen = d;
        }
      }
      if (best == std::numeric_limits<double>::infinity())
        return resource_exhausted("cannot place node '" + n.name + "' (op " + n.op + "): its " +
                                  std::to_string(bytes) +
                                  " output bytes fit on none of its feasible devices:" +
                                  alternatives);
      why = feasible.size() == 1 ? "its only feasible device"
                                 : "earliest estimated finish among" + alternatives;
      group_device[group] = chosen;
    }
    double start;
    double finish = finish_on(chosen, start);
    out.device[i] = chosen;
    out.start_s[i] = start;
    out.finish_s[i] = finish;
    out.why[i] = why;
    free_at[chosen] = finish;
    memory_used[chosen] += bytes;
    out.makespan_s = std::max(out.makespan_s, finish);
  }
  return out;
}

std::string greedy_placement::explain(const graph& g, const std::vector<int>& nodes,
                                      const std::vector<placement_device>& devices) const {
  std::string s;
  char buf[512];
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    std::snprintf(buf, sizeof buf, "%s (%s) -> %s [%.1f..%.1f us]: %s\n", n.name.c_str(),
                  n.op.c_str(), devices[device[i]].name.c_str(), start_s[i] * 1e6,
                  finish_s[i] * 1e6, why[i].c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "estimated step time: %.1f us\n", makespan_s * 1e6);
  return s + buf;
}

double simulate_placement(const graph& g, const std::vector<int>& nodes,
                          const std::vector<size_t>& device,
                          const std::vector<placement_device>& devices,
                          const std::vector<device_params>& params, const cost_model& costs,
                          const link_params& links) {
  // As the executor runs a step: each device, whenever it is free, runs the ready node that can
  // start first (ties: the earlier in `nodes`), not the next one in `nodes` (which, with a
  // pipeline placed over devices, held a device idle for a node its inputs made wait).
  std::unordered_map<int, size_t> index_of;
  for (size_t i = 0; i < nodes.size(); ++i)
    index_of[nodes[i]] = i;
  struct edge {
    size_t to;
    int64_t bytes;
  };
  std::vector<int> waiting(nodes.size(), 0);
  std::vector<std::vector<edge>> out(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    auto add = [&](int src, int64_t bytes) {
      auto it = index_of.find(src);
      if (it == index_of.end() || it->second >= i)
        return; // fed or bound, or a loop's back edge: available at the start
      ++waiting[i];
      out[it->second].push_back({i, bytes});
    };
    for (auto e : n.inputs)
      add(e.node, costs.output_bytes(g.at(e.node)));
    for (int c : n.control_inputs)
      add(c, 0);
  }
  using item = std::pair<double, size_t>; // (ready time, index in `nodes`)
  std::vector<std::priority_queue<item, std::vector<item>, std::greater<>>> ready(devices.size());
  std::vector<double> ready_at(nodes.size(), 0), free_at(devices.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i] == 0)
      ready[device[i]].push({0.0, i});
  double makespan = 0;
  for (size_t left = nodes.size(); left > 0; --left) {
    size_t d = devices.size();
    double start = 0;
    for (size_t k = 0; k < devices.size(); ++k)
      if (!ready[k].empty()) {
        double s = std::max(ready[k].top().first, free_at[k]);
        if (d == devices.size() || s < start)
          d = k, start = s;
      }
    if (d == devices.size())
      break; // unreachable: every node waits only for earlier ones
    size_t i = ready[d].top().second;
    ready[d].pop();
    free_at[d] = start + costs.compute_seconds(g, g.at(nodes[i]), *devices[d].spec.type, params[d]);
    makespan = std::max(makespan, free_at[d]);
    for (auto& e : out[i]) {
      size_t to = device[e.to];
      ready_at[e.to] = std::max(
          ready_at[e.to], free_at[d] + transfer_seconds(devices[d], devices[to], e.bytes, links));
      if (--waiting[e.to] == 0)
        ready[to].push({ready_at[e.to], e.to});
    }
  }
  return makespan;
}

} // namespace runnel
