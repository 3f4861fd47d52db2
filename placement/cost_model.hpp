#pragma once
// The cost model and the greedy placer of TensorFlow's white paper (§3.2.1).
//
//   cost_model costs;                                   // estimates from shapes
//   costs.record("layer1/MatMul", "CPU", 120e-6);       // measured times replace estimates
//   greedy_placement p = place_greedy(g, nodes, devices, params, costs, has_kernel).value();
//   std::cout << p.explain(g, nodes, devices);          // where each node went and why
//
// Estimated compute time of a node on a device: a fixed per-node overhead plus the largest of
// FLOPs / the device's FLOP rate, bytes touched / its memory bandwidth (its cache's when they fit
// there) and, for transcendental element-wise ops, elements / its transcendental rate (FLOPs,
// bytes and elements come from the inferred shapes; unknown dimensions count as `unknown_dim`).
// Moving a tensor costs nothing on the same device, a fixed latency between CPU devices of one
// process (buffers are shared, never copied), latency plus bytes / the host link's bandwidth to or
// from a GPU, and latency plus bytes / bandwidth between processes.
//
// The greedy placer simulates execution in topological order: each colocation group goes, when
// its first node is reached, to the feasible device where that node would finish earliest
// (waiting for the device to be free and for its inputs to arrive), respecting device memory
// limits; ties go to the device listed first, so the result is deterministic.

#include <map>
#include <string>
#include <vector>

#include "runnel/placement/placer.hpp"

namespace runnel {

struct device_params {
  double flops_per_s = 50e9;
  double bytes_per_s = 10e9; ///< memory bandwidth for tensors larger than the cache
  /// A node whose bytes touched fit in `cache_bytes` moves them at `cache_bytes_per_s` (or
  /// `bytes_per_s`, if faster).
  double cache_bytes_per_s = 30e9;
  int64_t cache_bytes = int64_t(8) << 20;
  /// Elements per second of a transcendental element-wise op (exp, tanh, the logistic
  /// function, ...): these are bound by their arithmetic, not by bytes or multiply-adds.
  double transcendental_per_s = 1e9;
  double node_overhead_s = 0.5e-6;
  int64_t memory_bytes = 0; ///< 0: no limit
};

struct link_params {
  double same_process_latency_s = 1e-6;
  /// Copies between host memory and a GPU of the same process (PCIe 4.0 x16 by default; the
  /// runtime measures its GPUs' on first use). GPU to GPU goes through the host: twice.
  double host_device_bytes_per_s = 20e9;
  double other_process_latency_s = 50e-6;
  double other_process_bytes_per_s = 2.5e9;
};

class cost_model {
public:
  int64_t unknown_dim = 100;
  /// Estimated FLOPs of `n` (from its shapes).
  double flops(const graph& g, const node& n) const;
  /// Bytes of all outputs of `n` (0 where unknown).
  int64_t output_bytes(const node& n) const;
  /// Bytes `n` reads and writes.
  double bytes_touched(const graph& g, const node& n) const;
  /// Elements of transcendental functions `n` computes (0 for other ops).
  double transcendental_elements(const node& n) const;
  /// Seconds `n` takes on a device of `type` with `params`: measured if recorded, else estimated.
  double compute_seconds(const graph& g, const node& n, const std::string& type,
                         const device_params& params) const;
  /// A measured time (e.g. from a traced run); later placements use it.
  void record(const std::string& node_name, const std::string& device_type, double seconds);
  bool has_measurement(const std::string& node_name, const std::string& device_type) const;

private:
  std::map<std::pair<std::string, std::string>, double> measured_;
};

struct greedy_placement {
  std::vector<size_t> device;    ///< per node: index into the devices
  std::vector<double> start_s;   ///< simulated start and finish times
  std::vector<double> finish_s;
  std::vector<std::string> why;  ///< per node: the decision, in words
  double makespan_s = 0;
  std::string explain(const graph& g, const std::vector<int>& nodes,
                      const std::vector<placement_device>& devices) const;
};

/// Places `nodes` (ids of `g` in topological order). `params` has one entry per device.
result<greedy_placement> place_greedy(const graph& g, const std::vector<int>& nodes,
                                      const std::vector<placement_device>& devices,
                                      const std::vector<device_params>& params,
                                      const cost_model& costs, const kernel_check& has_kernel,
                                      const placement_options& options = {},
                                      const link_params& links = {});

/// The simulated step time of a given placement (for comparing policies), as the executor runs
/// it: each device, whenever it is free, runs the ready node that can start first. (The greedy
/// placer's own simulation keeps the node list's order: it places one node at a time.)
double simulate_placement(const graph& g, const std::vector<int>& nodes,
                          const std::vector<size_t>& device,
                          const std::vector<placement_device>& devices,
                          const std::vector<device_params>& params, const cost_model& costs,
                          const link_params& links = {});

} // namespace runnel
