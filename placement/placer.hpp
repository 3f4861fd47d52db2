#pragma once
// Placement constraints and the simple placement policy TensorFlow shipped.
//
//   std::vector<placement_device> devices = ...;        // the runtime's, in priority order
//   auto where = place_simple(g, nodes, devices, has_kernel, {.allow_soft_placement = true});
//   // where.value()[i]: the index in `devices` of nodes[i]'s device
//
// Constraints, as in TensorFlow: a node's device spec (full or partial, TensorFlow's grammar);
// colocation groups (`colocate_with`, and every stateful op with the variables it updates
// through ref inputs), resolved with union-find and placed together; kernel availability (a node
// never goes to a device type it has no kernel for). With soft placement, a spec no device
// satisfies is relaxed to the group's other constraints instead of failing. An unsatisfiable
// placement is an error naming the node, its spec, its colocation group and the devices
// considered.
//
// The simple policy puts each group on the first feasible device in priority order; the
// cost-model placer (to come) chooses among the same feasible devices.

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/placement/device_name.hpp"

namespace runnel {

struct placement_device {
  std::string name;  ///< full name, e.g. /job:localhost/replica:0/task:0/device:CPU:0
  device_spec spec;  ///< the same, parsed
};

struct placement_options {
  bool allow_soft_placement = false;
  /// Why no GPU can be used (e.g. "this runtime has no GPU (the CUDA runtime says ...)"); added
  /// to the error of a node that asks for one.
  std::string no_gpu_reason;
  /// TensorFlow's default (sessions set it): a colocation group that asks for no device type and
  /// has GPU kernels goes to the first GPU it may use, whatever the cost model says.
  bool prefer_gpu = false;
};

/// Whether node `n` has a kernel for the device type `type` ("CPU", "GPU").
using kernel_check = std::function<bool(const node& n, const std::string& type)>;
/// A kernel_check that accepts every node on every device (planning without a runtime).
bool any_kernel(const node& n, const std::string& type);

/// Devices from their full names, which must parse (throws runnel::error otherwise).
std::vector<placement_device> placement_devices_from(const std::vector<std::string>& names);
/// `n` local virtual CPU devices: /job:localhost/replica:0/task:0/device:CPU:0 ...
std::vector<placement_device> local_cpu_devices(int n);
/// Every node of `g`, in id (topological) order.
std::vector<int> all_nodes(const graph& g);

/// The colocation groups of `nodes` (ids in `g`): for each of them, a representative id.
std::vector<int> colocation_groups(const graph& g, const std::vector<int>& nodes);

/// The constraints of `nodes`, resolved: each node's colocation group, and each group's
/// feasible devices (indices into `devices`, in priority order; never empty).
struct placement_constraints {
  std::vector<int> group_of; ///< per node (parallel to `nodes`)
  std::unordered_map<int, std::vector<size_t>> feasible;
};
result<placement_constraints> resolve_constraints(const graph& g, const std::vector<int>& nodes,
                                                  const std::vector<placement_device>& devices,
                                                  const kernel_check& has_kernel,
                                                  const placement_options& options = {});

/// For each of `nodes`, the index in `devices` of its device (simple policy).
result<std::vector<size_t>> place_simple(const graph& g, const std::vector<int>& nodes,
                                         const std::vector<placement_device>& devices,
                                         const kernel_check& has_kernel,
                                         const placement_options& options = {});

} // namespace runnel
