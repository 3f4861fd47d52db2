#pragma once
// Gradient accumulators: where the replicas of synchronous training leave their gradients for one
// step, TensorFlow's ConditionalAccumulator and SparseConditionalAccumulator.
//
//   apply(local_step, replica, gradient)   // dropped (and counted) when local_step is older
//                                          // than the accumulator's global step
//   take(n) -> mean of the gradients       // waits until n have arrived; then the global step
//                                          // advances, so gradients of the old step are stale
//
// This header is the interface kernels see (ops/cpu/accumulator_kernels.cpp); the runtime
// implements it as a resource of the device that holds it (actors/state/accumulator.cpp), next to the
// variable whose gradients it gathers. The sparse form sorts the indices of each gradient and
// merges duplicates before adding it, so what `take` returns has each row once.

#include <functional>
#include <string>
#include <vector>

#include "runnel/ops/core/attr.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

struct accumulator_spec {
  dtype type = dtype::f32;
  shape value_shape = shape::unknown(); ///< dense: the gradient's; sparse: the dense shape's
  bool sparse = false;
  /// Runnel: how many replicas train (total_num_replicas): a take that times out names the ones
  /// that sent nothing for the step. 0: unknown.
  int64_t total_replicas = 0;
  /// How long a take waits for its gradients before failing with `unavailable` (ms, -1 forever).
  int64_t timeout_ms = 60'000;
  /// "MEAN" (TensorFlow's default) or "SUM".
  std::string reduction = "MEAN";

  /// The spec held by a (Sparse)ConditionalAccumulator node's attributes.
  static result<accumulator_spec> from_node_attrs(std::string_view op, const attr_map& attrs);
  friend bool operator==(const accumulator_spec&, const accumulator_spec&) = default;
  std::string to_string() const;
};

class accumulator_resource {
public:
  /// Dense: {gradient}. Sparse: {indices (int64 [n]), values [n, ...], dense shape (int64)}.
  using take_done_fn = std::function<void(status, std::vector<tensor>)>;
  struct stats {
    int64_t global_step = 0;
    int64_t accumulated = 0; ///< gradients in the current sum
    int64_t dropped = 0;     ///< stale gradients dropped since creation
    int64_t applied = 0;     ///< gradients accumulated since creation
    int64_t refused = 0;     ///< second gradients of one replica for one step, refused
  };

  virtual ~accumulator_resource() = default;
  virtual const std::string& name() const = 0;
  virtual const accumulator_spec& spec() const = 0;

  /// Adds `gradient` (as in take_done_fn) sent by `replica` (-1: unknown) for `local_step`, or
  /// drops it when local_step is older than the global step, or refuses it when `replica`
  /// already has a gradient in the current sum (counted; one gradient per replica and step).
  /// Errors: a dtype or shape that does not match the accumulator, a closed accumulator.
  virtual status apply(int64_t local_step, int64_t replica, std::vector<tensor> gradient) = 0;
  /// Waits until `num_required` gradients have accumulated, then hands out their mean (or sum),
  /// starts an empty sum and advances the global step by one. Fails with `unavailable` naming
  /// the replicas that sent nothing after the spec's timeout, `cancelled` when closed.
  virtual void take(int64_t num_required, take_done_fn done) = 0;
  /// Gives back what a take handed out, when the step that took it was aborted: the sum, the
  /// count and the global step are as before the take (gradients that arrived since are kept).
  virtual void put_back(std::vector<tensor> taken, int64_t count) = 0;
  /// Sets the global step (e.g. a restarted chief's), dropping a partial sum that holds a
  /// gradient of an older step, and reopens a closed accumulator. After a take timed out (with
  /// total_replicas set) the gradients that came since were held, not judged: they are applied
  /// (or dropped as stale) against this step now.
  virtual void set_global_step(int64_t step) = 0;
  /// Fails waiting and later takes and applies with `cancelled` until set_global_step.
  virtual void close() = 0;
  virtual stats get_stats() const = 0;
};

} // namespace runnel
