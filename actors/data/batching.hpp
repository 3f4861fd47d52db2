#pragma once
// Batching helpers built on queue actors and queue runners (TensorFlow 1.x's tf.train.batch,
// shuffle_batch and bucket_by_sequence_length).
//
//   auto b = batch({image, label}, {.batch_size = 100, .num_threads = 2});
//   coordinator coord;
//   for (auto& r : b.runners) throw_if_error(r.start(s, coord));
//   auto r = s.run({}, b.tensors);              // [100,784], [100]
//
//   // Sequences of varying length: batches of similar lengths, padded.
//   auto bk = bucket_by_sequence_length(length, {tokens}, {10, 20}, {32, 32, 16});
//   // bk.tensors[0]: the lengths, [B]; bk.tensors[1]: tokens, [B, longest or boundary - 1]
//
// Each helper adds its queues and ops to the graph of its inputs and returns the runners to
// start. Inputs are evaluated by the runners' steps (placeholders cannot be fed through them).

#include <vector>

#include "runnel/actors/data/coordinator.hpp"

namespace runnel {

struct batch_options {
  int64_t batch_size = 32;
  int num_threads = 1;      ///< enqueue loops
  int64_t capacity = 32;    ///< elements the queue holds
  bool enqueue_many = false; ///< inputs are already batches: enqueue their rows
  bool dynamic_pad = false;  ///< pad elements of varying shape (unknown dimensions) with zeros
  bool allow_smaller_final_batch = false; ///< after the input ends, a last, smaller batch
  std::string name = "batch";
};

struct batched {
  std::vector<output> tensors;
  std::vector<queue_runner> runners;
};

batched batch(const std::vector<output>& tensors, const batch_options& options);
/// Like batch through a RandomShuffleQueue keeping `min_after_dequeue` elements to mix.
batched shuffle_batch(const std::vector<output>& tensors, const batch_options& options,
                      int64_t min_after_dequeue, int64_t seed = 0);

struct bucket_options {
  int num_threads = 1;
  int64_t capacity = 32; ///< per bucket
  bool pad_to_bucket_boundary = false; ///< pad the first dimension to the bucket's boundary - 1
  bool allow_smaller_final_batch = false;
  std::string name = "bucket";
};

/// Routes each element (tensors whose first dimension is the sequence) to the bucket of
/// `length` (an int32 or int64 scalar) among `boundaries`, batches each bucket with its own
/// size (`batch_sizes` has one more entry than `boundaries`), padding to the longest element of
/// the batch or to the boundary. Outputs: the lengths [B], then each tensor batched.
batched bucket_by_sequence_length(output length, const std::vector<output>& tensors,
                                  const std::vector<int64_t>& boundaries,
                                  const std::vector<int64_t>& batch_sizes,
                                  const bucket_options& options = {});

} // namespace runnel
