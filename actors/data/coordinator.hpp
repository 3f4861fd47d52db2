#pragma once
// Queue runners and a coordinator: the TensorFlow 1.x input-pipeline pattern, run by actors.
//
//   auto q = fifo_queue(g, {dtype::f32, dtype::i64}, {.shapes = {{784}, {}}, .capacity = 1000});
//   auto enq = q.enqueue_many({images, labels});
//   queue_runner runner(q, {enq, enq});              // two enqueue loops
//   session s(rt, g);
//   coordinator coord;
//   throw_if_error(runner.start(s, coord));
//   while (!coord.should_stop()) {
//     auto r = s.run({}, {}, {train_op});            // dequeues inside
//     if (r.error().code() == error_code::out_of_range) break;   // input exhausted
//   }
//   coord.request_stop();
//   throw_if_error(coord.join());                    // the first error a runner hit, if any
//
// Each enqueue op of a runner is run over and over by its own actor through session::
// run_callback (no user threads, no thread blocked while an enqueue waits for room). When an
// enqueue op ends with out_of_range (its own input queue was exhausted) or cancelled, that loop
// ends; the last loop of a runner to end closes the runner's queue, so its consumers drain it and
// then see out_of_range. Any other error stops the coordinator, and join() returns it.
// request_stop() closes the runners' queues with cancel_pending_enqueues, so no enqueue stays
// blocked. A step that dequeues from a queue nobody fills fails after the queue's timeout with a
// message that asks whether the runners were started.

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/layers/data_flow.hpp"

namespace runnel {

class coordinator {
public:
  coordinator();
  /// Requests a stop and joins (with the default grace period).
  ~coordinator();
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  /// Asks every runner to stop; a non-ok `why` is kept (the first one wins) and join returns it.
  void request_stop(status why = {});
  bool should_stop() const;
  /// Waits until a stop is requested or `timeout` passes; true when stopped.
  bool wait_for_stop(std::chrono::milliseconds timeout) const;
  /// Waits for every runner loop to end. Once a stop is requested they get `grace` to finish;
  /// loops still running then are named in a deadline_exceeded error. Returns the error that
  /// stopped the coordinator, if any.
  status join(std::chrono::milliseconds grace = std::chrono::seconds(5));
  /// The error passed to request_stop, or ok.
  status error() const;

  struct impl;
  impl& internals() { return *impl_; }
  std::shared_ptr<impl> shared_impl() const { return impl_; }

private:
  std::shared_ptr<impl> impl_;
};

class queue_runner {
public:
  /// Adds the close ops for `q` (and `also_close`) to its graph; `enqueue_ops` each get their
  /// own loop.
  queue_runner(const graph_queue& q, std::vector<operation> enqueue_ops,
               const std::vector<graph_queue>& also_close = {});
  /// Starts the loops on `s`'s runtime; `s` and `coord` must outlive them (join first).
  status start(session& s, coordinator& coord) const;
  const std::string& queue_name() const { return queue_name_; }

private:
  std::string queue_name_;
  std::vector<operation> enqueue_ops_;
  operation close_op_;
  operation cancel_op_;
};

} // namespace runnel
