#pragma once
// Building queue and iterator ops.
//
//   auto q = random_shuffle_queue(g, {dtype::f32, dtype::i64},
//                                 {.shapes = {{784}, {}}, .capacity = 10'000,
//                                  .min_after_dequeue = 1'000, .seed = 7});
//   operation enq = q.enqueue_many({images, labels});
//   std::vector<output> batch = q.dequeue_many(100);   // float32[100,784], int64[100]
//   operation stop = q.close(/*cancel_pending_enqueues=*/true);
//
// The queue itself lives in the runtime (one per name per device) and outlives sessions: two
// sessions over graphs that name the same queue share it.

#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/kernel/queue.hpp"

namespace runnel {

struct indexed_slices; // ops/grad/gradients.hpp

struct queue_options {
  std::vector<shape> shapes; ///< per component; empty: any shape (no dequeue_many)
  int64_t capacity = -1;     ///< -1: unbounded
  int64_t min_after_dequeue = 0; ///< random_shuffle_queue only
  int64_t seed = 0;              ///< random_shuffle_queue only; 0: random
  std::string shared_name;       ///< the runtime name; default: the node's name
  int64_t timeout_ms = 60'000;   ///< longest a dequeue waits; -1: forever
  std::string timeout_hint;      ///< what a dequeue that timed out says about why
  /// padding_fifo_queue only: pad dequeue_many to these dimensions where given (-1: longest).
  std::vector<shape> padded_shapes;
};

/// A queue node and builders for the ops that use it.
class graph_queue {
public:
  graph_queue() = default;
  graph_queue(output handle, std::vector<dtype> types, std::vector<shape> shapes)
      : handle_(handle), types_(std::move(types)), shapes_(std::move(shapes)) {}

  output handle() const { return handle_; }
  const std::vector<dtype>& types() const { return types_; }
  const std::string& name() const { return handle_.node().name; }

  operation enqueue(const std::vector<output>& components, std::string_view name = {}) const;
  /// Enqueues the rows of each component (their first dimensions must agree).
  operation enqueue_many(const std::vector<output>& components, std::string_view name = {}) const;
  std::vector<output> dequeue(std::string_view name = {}) const;
  std::vector<output> dequeue_many(int64_t n, std::string_view name = {}) const;
  std::vector<output> dequeue_many(output n, std::string_view name = {}) const;
  /// Up to n elements: fewer only once the queue is closed (the final partial batch).
  std::vector<output> dequeue_up_to(int64_t n, std::string_view name = {}) const;
  operation close(bool cancel_pending_enqueues = false, std::string_view name = {}) const;
  output size(std::string_view name = {}) const;
  /// Runnel: drops the elements, reopens the queue and enqueues the rows of `components`
  /// (QueueReset). The sync token barrier's (re)start.
  operation reset(const std::vector<output>& components, std::string_view name = {}) const;
  /// Runnel: fails the dequeues waiting now with `code` and `message` (a string scalar); later
  /// ones wait as usual (QueueFail).
  operation fail(output message, std::string_view name = {},
                 error_code code = error_code::unavailable) const;

private:
  std::vector<output> dequeue_op(std::string_view op, std::vector<endpoint> in,
                                 std::string_view name) const;
  output handle_;
  std::vector<dtype> types_;
  std::vector<shape> shapes_;
};

graph_queue fifo_queue(graph& g, std::vector<dtype> types, queue_options options = {},
                       std::string_view name = {});
graph_queue random_shuffle_queue(graph& g, std::vector<dtype> types, queue_options options = {},
                                 std::string_view name = {});
/// Elements may differ in shape along dimensions `options.shapes` leaves unknown (-1);
/// dequeue_many pads them with zeros to the longest.
graph_queue padding_fifo_queue(graph& g, std::vector<dtype> types, queue_options options = {},
                               std::string_view name = {});
/// Component 0 of every element is an int64 priority; the smallest is dequeued first (ties in
/// enqueue order). `types` excludes that priority component.
graph_queue priority_queue(graph& g, std::vector<dtype> types, queue_options options = {},
                           std::string_view name = {});

struct accumulator_options {
  bool sparse = false;            ///< SparseConditionalAccumulator (indexed slices)
  std::string shared_name;        ///< the runtime name; default: the node's name
  std::string reduction = "MEAN"; ///< or "SUM"
  int64_t total_num_replicas = 0; ///< named in a take's timeout error (0: unknown)
  int64_t timeout_ms = 60'000;    ///< longest a take waits; -1: forever
};

/// A gradient accumulator node (ops/kernel/accumulator.hpp) and builders for the ops that use it.
class graph_accumulator {
public:
  graph_accumulator() = default;
  graph_accumulator(output handle, dtype type, shape s, bool sparse)
      : handle_(handle), type_(type), shape_(std::move(s)), sparse_(sparse) {}
  output handle() const { return handle_; }
  bool sparse() const { return sparse_; }

  /// Adds `grad` for `local_step` (int64 scalar); `replica` names the sender in errors.
  operation apply_grad(output local_step, output grad, int64_t replica = -1,
                       std::string_view name = {}) const;
  operation apply_slices(output local_step, const indexed_slices& grad, int64_t replica = -1,
                         std::string_view name = {}) const;
  /// Waits for `num_required` (int32 scalar) gradients and returns their mean.
  output take_grad(output num_required, std::string_view name = {}) const;
  indexed_slices take_slices(output num_required, std::string_view name = {}) const;
  output num_accumulated(std::string_view name = {}) const;
  output num_dropped(std::string_view name = {}) const;
  /// Second gradients of one replica for one step refused so far (int64).
  output num_refused(std::string_view name = {}) const;
  operation set_global_step(output step, std::string_view name = {}) const;
  operation close(std::string_view name = {}) const;

private:
  output handle_;
  dtype type_ = dtype::f32;
  shape shape_;
  bool sparse_ = false;
};

/// A (Sparse)ConditionalAccumulator of `type` gradients shaped `s` (sparse: the dense shape).
graph_accumulator conditional_accumulator(graph& g, dtype type, shape s,
                                          accumulator_options options = {},
                                          std::string_view name = {});

/// A BucketEnqueue node: enqueues `components` into `buckets[i]`, where i is the bucket of
/// `length` (an int64 scalar) among `boundaries` ([b_{i-1}, b_i)); one more queue than boundaries.
operation bucket_enqueue(output length, const std::vector<graph_queue>& buckets,
                         const std::vector<int64_t>& boundaries,
                         const std::vector<output>& components, std::string_view name = {});

/// An IteratorGetNext node reading the dataset iterator `iterator_name` of the runtime
/// (initialised from C++, see actors/data/dataset.hpp). Throws on an empty `types`.
std::vector<output> iterator_get_next(graph& g, const std::string& iterator_name,
                                      std::vector<dtype> types, std::vector<shape> shapes = {},
                                      std::string_view name = {});

} // namespace runnel
