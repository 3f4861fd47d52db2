// Datasets: the public dataset type, which builds a description of stages (sources.cpp,
// transforms.cpp, concurrency.cpp), and the element-at-a-time reading of a stream.
#include "runnel/actors/data/dataset.hpp"

#include <algorithm>

#include "runnel/actors/data/stages.hpp"
#include "runnel/ops/kernel/queue.hpp"
#include "runnel/actors/exec/internal.hpp"

namespace runnel {

result<bool> element_stream::next(element& out) {
  if (pos_ >= pending_.size()) {
    pending_.clear();
    pos_ = 0;
    RUNNEL_RETURN_IF_ERROR(next_chunk(pending_, 64));
    if (pending_.empty())
      return false;
  }
  out = std::move(pending_[pos_++]);
  return true;
}

std::optional<result<bool>> element_stream::try_next(element& out) {
  if (pos_ >= pending_.size()) {
    pending_.clear();
    pos_ = 0;
    auto st = try_next_chunk(pending_, 64);
    if (!st)
      return std::nullopt;
    if (!st->ok())
      return result<bool>(*st);
    if (pending_.empty())
      return result<bool>(false);
  }
  out = std::move(pending_[pos_++]);
  return result<bool>(true);
}

// ---- dataset ----

dataset dataset::records(std::vector<std::string> files, records_options options) {
  return dataset(std::make_shared<records_node>(std::move(files), options));
}
dataset dataset::from_tensors(element components) {
  return dataset(make_tensors_node(std::vector<element>{std::move(components)}));
}
dataset dataset::from_tensor_slices(element components) {
  std::vector<element> rows;
  if (!components.empty()) {
    int64_t n = components[0].rank() > 0 ? components[0].dim(0) : -1;
    for (auto& c : components)
      if (c.rank() < 1 || c.dim(0) != n)
        throw error(invalid_argument("from_tensor_slices: every component needs the same first "
                                     "dimension; got shapes " +
                                     components[0].shape().to_string() + " and " +
                                     c.shape().to_string()));
    rows.resize(size_t(n));
    for (auto& c : components) {
      auto r = unstack_rows(c);
      for (int64_t i = 0; i < n; ++i)
        rows[size_t(i)].push_back(std::move(r[size_t(i)]));
    }
  }
  return dataset(make_tensors_node(std::move(rows)));
}
dataset dataset::range(int64_t n) {
  return dataset(make_range_node(n));
}
namespace {
void check_parallelism(const char* stage, int parallelism) {
  if (parallelism < 1 && parallelism != dataset::autotune)
    throw error(invalid_argument(std::string(stage) +
                                 ": parallelism must be at least 1 or dataset::autotune, got " +
                                 std::to_string(parallelism)));
}
} // namespace

dataset dataset::map(map_fn fn, int parallelism) const {
  check_parallelism("map", parallelism);
  return dataset(make_map_node(node_, std::move(fn), parallelism));
}
dataset dataset::parse_examples(std::vector<feature_spec> specs, int parallelism) const {
  check_parallelism("parse_examples", parallelism);
  return dataset(make_parse_node(node_, std::move(specs), parallelism));
}
dataset dataset::filter(predicate_fn keep) const {
  return dataset(make_filter_node(node_, std::move(keep)));
}
dataset dataset::shuffle(size_t buffer, uint64_t seed, bool reshuffle) const {
  return dataset(make_shuffle_node(node_, buffer, seed, reshuffle));
}
dataset dataset::batch(int64_t n, bool drop_remainder) const {
  if (n < 1)
    throw error(invalid_argument("batch size must be at least 1, got " + std::to_string(n)));
  return dataset(make_batch_node(node_, n, drop_remainder, false,
                                              std::vector<shape>{}));
}
dataset dataset::padded_batch(int64_t n, std::vector<shape> padded_shapes,
                              bool drop_remainder) const {
  if (n < 1)
    throw error(invalid_argument("batch size must be at least 1, got " + std::to_string(n)));
  return dataset(make_batch_node(node_, n, drop_remainder, true,
                                              std::move(padded_shapes)));
}
dataset dataset::bucket_by_length(length_fn length, std::vector<int64_t> boundaries,
                                  std::vector<int64_t> batch_sizes,
                                  bool pad_to_bucket_boundary) const {
  if (batch_sizes.size() != boundaries.size() + 1)
    throw error(invalid_argument("bucket_by_length: " + std::to_string(boundaries.size()) +
                                 " boundaries need " + std::to_string(boundaries.size() + 1) +
                                 " batch sizes, got " + std::to_string(batch_sizes.size())));
  if (!std::is_sorted(boundaries.begin(), boundaries.end()))
    throw error(invalid_argument("bucket_by_length: boundaries must be increasing"));
  for (auto b : batch_sizes)
    if (b < 1)
      throw error(invalid_argument("bucket_by_length: batch sizes must be at least 1"));
  return dataset(make_bucket_node(node_, std::move(length), std::move(boundaries),
                                               std::move(batch_sizes), pad_to_bucket_boundary));
}
dataset dataset::repeat(int64_t epochs) const {
  return dataset(make_repeat_node(node_, epochs));
}
dataset dataset::take(int64_t n) const {
  return dataset(make_take_skip_node(node_, std::max<int64_t>(0, n), 0));
}
dataset dataset::skip(int64_t n) const {
  return dataset(make_take_skip_node(node_, -1, std::max<int64_t>(0, n)));
}
dataset dataset::shard(int64_t n, int64_t index) const {
  if (n < 1 || index < 0 || index >= n)
    throw error(invalid_argument("shard: index " + std::to_string(index) + " is not in [0, " +
                                 std::to_string(n) + ")"));
  return dataset(make_shard_node(node_, n, index));
}
dataset dataset::prefetch(int64_t n) const {
  if (n < 1 && n != autotune)
    throw error(invalid_argument("prefetch: buffer size must be at least 1 or dataset::autotune, "
                                 "got " +
                                 std::to_string(n)));
  return dataset(make_prefetch_node(node_, n));
}

result<std::unique_ptr<element_stream>> dataset::open(runtime* rt) const {
  open_context ctx{rt ? rt->internals().system.get() : nullptr}; // no runtime: threads
  return node_->open(ctx);
}

map_fn parse_examples(std::vector<feature_spec> specs) {
  auto parser = std::make_shared<example_parser>(example_parser::create(std::move(specs)).value());
  return [parser](element e) -> result<element> {
    if (e.size() != 1 || e[0].type() != dtype::string)
      return invalid_argument("parse_examples expects elements of one string component "
                              "(serialized Examples)");
    element out;
    const tensor& t = e[0];
    if (t.rank() == 0)
      RUNNEL_RETURN_IF_ERROR(parser->parse_single(*t.data<std::string>(), out));
    else if (t.rank() == 1)
      RUNNEL_RETURN_IF_ERROR(parser->parse_batch(t.flat<std::string>(), out));
    else
      return invalid_argument("parse_examples: serialized records of shape " +
                              t.shape().to_string() + " (want a scalar or a vector)");
    return out;
  };
}

} // namespace runnel
