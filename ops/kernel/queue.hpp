#pragma once
// Queues: bounded, blocking buffers of elements (tuples of tensors) shared by steps and sessions.
//
//   graph g;
//   auto q = fifo_queue(g, {dtype::f32, dtype::i64}, {.shapes = {{784}, {}}, .capacity = 1000});
//   auto enq = q.enqueue_many({images, labels});        // ops/layers/data_flow.hpp builds the ops
//   auto batch = q.dequeue_many(100);                   // [100,784] float32, [100] int64
//
// This header is the interface kernels see; the runtime implements it as a resource actor that
// owns the elements (actors/state/queue.cpp), so every operation on one queue is serialised there.
// Semantics follow TensorFlow: an enqueue waits while the queue is full, a dequeue while it has
// too few elements; after `close`, enqueues fail with `cancelled` and a dequeue that can no longer
// be satisfied fails with `out_of_range`. Every element is delivered exactly once. Unlike
// TensorFlow, waits are bounded: a dequeue that waits longer than its timeout fails with
// `deadline_exceeded` and a message saying what it waited for, instead of hanging the program.

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "runnel/ops/core/attr.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

enum class queue_kind { fifo, random_shuffle, padding_fifo, priority };
const char* to_string(queue_kind k);

/// What a queue holds and how it orders its elements.
struct queue_spec {
  queue_kind kind = queue_kind::fifo;
  std::vector<dtype> types;  ///< one per component
  std::vector<shape> shapes; ///< one per component, or empty (any shape)
  /// padding_fifo: what dequeue_many pads each component to where a dimension is given (-1: the
  /// longest in the batch); empty: the longest. A Runnel extension used by bucketing.
  std::vector<shape> padded_shapes;
  int64_t capacity = -1;     ///< elements; -1: unbounded
  int64_t min_after_dequeue = 0; ///< random_shuffle: elements kept back to shuffle among
  int64_t seed = 0;              ///< random_shuffle: 0 draws a random seed
  /// How long a dequeue may wait before failing with deadline_exceeded; -1: forever.
  int64_t dequeue_timeout_ms = 60'000;
  /// What a dequeue that timed out says about why (empty: advice about queue runners).
  std::string timeout_hint;

  /// The spec held by a queue node's attributes (FIFOQueueV2, RandomShuffleQueueV2, ...).
  static result<queue_spec> from_node_attrs(std::string_view op, const attr_map& attrs);
  friend bool operator==(const queue_spec&, const queue_spec&) = default;
};

enum class dequeue_mode {
  one,   ///< one element, components without a batch dimension
  many,  ///< exactly n elements stacked along a new first dimension
  up_to, ///< n, or fewer (at least one) once the queue is closed
};

class queue_resource {
public:
  using done_fn = std::function<void(status)>;
  using dequeue_done_fn = std::function<void(status, std::vector<tensor>)>;
  static constexpr int64_t default_timeout = -2; ///< use the queue's own dequeue timeout

  virtual ~queue_resource() = default;
  virtual const std::string& name() const = 0;
  virtual const queue_spec& spec() const = 0;

  /// Enqueues one element (`many` false) or the rows of each component (`many` true: every
  /// component has the same first dimension). `done` runs once every row is in the queue, or with
  /// the error (rows already enqueued stay there, as in TensorFlow). `timeout_ms` -1: forever.
  virtual void enqueue(std::vector<tensor> components, bool many, int64_t timeout_ms,
                       done_fn done) = 0;
  /// Dequeues per `mode`; `done` gets one tensor per component.
  virtual void dequeue(int64_t n, dequeue_mode mode, int64_t timeout_ms,
                       dequeue_done_fn done) = 0;
  /// Closes the queue; `done` runs once the close has taken effect. With `cancel_pending_enqueues`
  /// waiting enqueues fail with `cancelled`; otherwise they still complete as room appears.
  virtual void close(bool cancel_pending_enqueues, done_fn done) = 0;
  /// Gives back what a dequeue in `mode` returned, to the front of the queue, when the step that
  /// asked for it was aborted meanwhile: nothing is lost. (Padded batches go back padded.)
  virtual void put_back(std::vector<tensor> components, dequeue_mode mode) = 0;
  /// Runnel: drops every element, reopens the queue (undoing close and fail) and enqueues the
  /// rows of `components` (waiting dequeues are then served). Waiting enqueues are cancelled.
  virtual void reset(std::vector<tensor> components, done_fn done) = 0;
  /// Runnel: fails the dequeues waiting now with `reason` (their elements stay); later ones wait
  /// as usual. What the sync barrier tells the workers waiting for a step that will not come.
  virtual void fail(status reason) = 0;
  /// Elements in the queue now (a snapshot).
  virtual int64_t size() const = 0;
  virtual bool closed() const = 0;
};

/// A dataset iterator as kernels see it: IteratorGetNext asks it for the next element. The
/// runtime implements it over a pipeline of dataset actors (actors/data/dataset.hpp).
class iterator_resource {
public:
  virtual ~iterator_resource() = default;
  virtual const std::string& name() const = 0;
  /// The next element; `out_of_range` at the end of the dataset, `failed_precondition` before
  /// the iterator is initialised.
  virtual void get_next(queue_resource::dequeue_done_fn done) = 0;
  /// Returns an element taken by a step that was aborted meanwhile; get_next gives it again.
  virtual void put_back(std::vector<tensor> element) = 0;
};

/// Stacks equally shaped tensors along a new first dimension. With `pad` the items may differ in
/// shape (same rank): each is padded with zeros (empty strings) to the largest size per dimension,
/// or to `pad_shape` where it gives a dimension (-1: the largest).
result<tensor> stack_tensors(std::span<const tensor> items, bool pad = false,
                             const shape& pad_shape = shape::unknown());
/// The rows of `t` as tensors without the first dimension, sharing its buffer.
std::vector<tensor> unstack_rows(const tensor& t);

} // namespace runnel
