#include "runnel/actors/data/batching.hpp"

#include "runnel/ops/graph/builder.hpp"

namespace runnel {
namespace {

/// Element shapes of `tensors` (without the batch dimension when `many`); unknown dimensions
/// stay -1 for padding queues.
std::vector<shape> element_shapes(const std::vector<output>& tensors, bool many) {
  std::vector<shape> out;
  for (auto& t : tensors) {
    shape s = t.shape();
    if (many && s.has_known_rank() && s.rank() > 0)
      s = shape(std::vector<int64_t>(s.dims().begin() + 1, s.dims().end()));
    out.push_back(s);
  }
  return out;
}

std::vector<dtype> types_of(const std::vector<output>& tensors) {
  std::vector<dtype> out;
  for (auto& t : tensors)
    out.push_back(t.type());
  return out;
}

batched finish(const graph_queue& q, const std::vector<output>& tensors,
               const batch_options& o) {
  if (tensors.empty())
    throw error(invalid_argument(o.name + ": nothing to batch"));
  auto enq = o.enqueue_many ? q.enqueue_many(tensors) : q.enqueue(tensors);
  batched b;
  b.runners.emplace_back(q, std::vector<operation>(size_t(std::max(1, o.num_threads)), enq));
  b.tensors = o.allow_smaller_final_batch ? q.dequeue_up_to(o.batch_size)
                                          : q.dequeue_many(o.batch_size);
  return b;
}

} // namespace

batched batch(const std::vector<output>& tensors, const batch_options& o) {
  graph& g = tensors.at(0).owner();
  auto scope = g.name_scope(o.name);
  queue_options qo{.shapes = element_shapes(tensors, o.enqueue_many), .capacity = o.capacity};
  auto q = o.dynamic_pad ? padding_fifo_queue(g, types_of(tensors), qo, "padding_fifo_queue")
                         : fifo_queue(g, types_of(tensors), qo, "fifo_queue");
  return finish(q, tensors, o);
}

batched shuffle_batch(const std::vector<output>& tensors, const batch_options& o,
                      int64_t min_after_dequeue, int64_t seed) {
  graph& g = tensors.at(0).owner();
  auto scope = g.name_scope(o.name);
  queue_options qo{.shapes = element_shapes(tensors, o.enqueue_many),
                   .capacity = o.capacity,
                   .min_after_dequeue = min_after_dequeue,
                   .seed = seed};
  auto q = random_shuffle_queue(g, types_of(tensors), qo, "random_shuffle_queue");
  return finish(q, tensors, o);
}

batched bucket_by_sequence_length(output length, const std::vector<output>& tensors,
                                  const std::vector<int64_t>& boundaries,
                                  const std::vector<int64_t>& batch_sizes,
                                  const bucket_options& o) {
  if (batch_sizes.size() != boundaries.size() + 1)
    throw error(invalid_argument(o.name + ": " + std::to_string(boundaries.size()) +
                                 " boundaries need " + std::to_string(boundaries.size() + 1) +
                                 " batch sizes, got " + std::to_string(batch_sizes.size())));
  if (!std::is_sorted(boundaries.begin(), boundaries.end()))
    throw error(invalid_argument(o.name + ": boundaries must be increasing"));
  graph& g = length.owner();
  auto scope = g.name_scope(o.name);
  auto len64 = length.type() == dtype::i64 ? length : cast(length, dtype::i64);
  std::vector<output> components{len64};
  components.insert(components.end(), tensors.begin(), tensors.end());
  auto types = types_of(components);
  auto shapes = element_shapes(components, false);
  // One padding queue per bucket; a runner moves its full batches into one queue of batches.
  std::vector<graph_queue> buckets;
  for (size_t b = 0; b < batch_sizes.size(); ++b) {
    queue_options qo{.shapes = shapes, .capacity = o.capacity};
    if (o.pad_to_bucket_boundary && b < boundaries.size()) {
      for (auto s : shapes) {
        if (s.has_known_rank() && s.rank() > 0)
          s.set_dim(0, boundaries[b] - 1);
        qo.padded_shapes.push_back(s);
      }
    }
    buckets.push_back(
        padding_fifo_queue(g, types, qo, "bucket_" + std::to_string(b)));
  }
  auto batches = fifo_queue(g, types, {.capacity = int64_t(2 * batch_sizes.size())}, "batches");
  batched out;
  auto route = bucket_enqueue(len64, buckets, boundaries, components);
  // The routing loops close every bucket when the input ends; then the batch loops drain the
  // buckets, and the last of them closes the queue of batches.
  std::vector<graph_queue> others(buckets.begin() + 1, buckets.end());
  out.runners.emplace_back(buckets[0],
                           std::vector<operation>(size_t(std::max(1, o.num_threads)), route),
                           others);
  std::vector<operation> moves;
  for (size_t b = 0; b < buckets.size(); ++b) {
    auto full = o.allow_smaller_final_batch ? buckets[b].dequeue_up_to(batch_sizes[b])
                                            : buckets[b].dequeue_many(batch_sizes[b]);
    moves.push_back(batches.enqueue(full));
  }
  out.runners.emplace_back(batches, moves);
  out.tensors = batches.dequeue();
  return out;
}

} // namespace runnel
