#pragma once
// The pieces of dataset stages that their files share (actors/data/): the node and stream types,
// the workers stages run blocking work on, and the streams one stage builds from another's
// file. Private to actors/data/.
#include <atomic>
#include <functional>
#include <memory>
#include <random>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/storage/record_index.hpp"

namespace caf {
class actor_system;
}

namespace runnel {

/// Where work that may block runs: a detached (own-thread) typed actor of the runtime's actor
/// system, or, for a dataset opened without a runtime, a plain thread. Tasks run one at a time,
/// in order; destroying the worker lets it finish the task it is running, then it stops.
class stage_worker {
public:
  virtual ~stage_worker() = default;
  virtual void post(std::function<void()> task) = 0;
};

struct stage_registry; // the counters of one opened dataset's stages (stage_stats.cpp)
std::vector<stage_stats> snapshot_stages(const stage_registry& r);

/// How a stage instance starts its workers: on `sys` when the dataset is opened by a runtime.
/// `stages` collects what the stages opened with it do, for element_stream::stats().
struct open_context {
  caf::actor_system* sys = nullptr;
  std::shared_ptr<stage_registry> stages;
  std::unique_ptr<stage_worker> start_worker() const;
};

class dataset_node {
public:
  virtual ~dataset_node() = default;
  /// Opens this stage and those it reads, each counted in ctx.stages (created here when the
  /// context has none yet: this node is then the dataset's last stage).
  result<std::unique_ptr<element_stream>> open(open_context& ctx) const;
  /// The stage's name in stats(): "batch(100)", "prefetch(4)".
  virtual std::string describe() const = 0;

protected:
  virtual result<std::unique_ptr<element_stream>> open_stream(open_context& ctx) const = 0;
};

using stream_ptr = std::unique_ptr<element_stream>;
using node_ptr = std::shared_ptr<const dataset_node>;
inline constexpr size_t chunk_size = 64;

class unary_node : public dataset_node {
public:
  explicit unary_node(node_ptr input) : input_(std::move(input)) {}
  const dataset_node* input() const { return input_.get(); }

protected:
  result<stream_ptr> open_input(open_context& ctx) const { return input_->open(ctx); }
  node_ptr input_;
};

/// records(): shards read interleaved (sources.cpp). Later stages look for it to fuse with it.
class records_node : public dataset_node {
public:
  records_node(std::vector<std::string> patterns, records_options o)
      : patterns_(std::move(patterns)), options_(o) {}
  std::string describe() const override { return "records"; }
  result<stream_ptr> open_stream(open_context& ctx) const override;
  /// The files of one pass, in the order they are opened.
  result<std::vector<std::string>> expand() const;
  const records_options& options() const { return options_; }

private:
  std::vector<std::string> patterns_;
  records_options options_;
  mutable std::atomic<uint64_t> opens_{0};
};

// ---- sources (sources.cpp) ----
node_ptr make_tensors_node(std::vector<element> items);
node_ptr make_range_node(int64_t n);
/// records(files).shuffle(buffer) fused: the window holds where records lie, not their bytes.
stream_ptr make_records_shuffle_stream(std::vector<std::string> files, records_options o,
                                       size_t buffer, uint64_t seed);
/// records(files)[.shuffle(buffer)].batch(batch).parse_examples(...) fused: each batch parsed
/// straight from the mapped files, on `parallelism` workers.
stream_ptr make_records_parse_stream(open_context& ctx, std::vector<std::string> files,
                                     records_options o, size_t buffer, uint64_t seed,
                                     int64_t batch, bool drop,
                                     std::shared_ptr<const example_parser> parser,
                                     int parallelism);

// ---- overlapped stages (concurrency.cpp) ----
/// Everything upstream run on a worker into a buffer of `capacity` elements.
stream_ptr make_prefetch_stream(open_context& ctx, stream_ptr upstream, size_t capacity);
node_ptr make_prefetch_node(node_ptr in, int64_t n);
/// `fn` applied to each element: in the pulling thread (parallelism <= 1), or on workers.
stream_ptr make_map_stream(open_context& ctx, stream_ptr in, map_fn fn, int parallelism);

// ---- transformations (transforms.cpp) ----
node_ptr make_map_node(node_ptr in, map_fn fn, int parallelism);
node_ptr make_parse_node(node_ptr in, std::vector<feature_spec> specs, int parallelism);
node_ptr make_filter_node(node_ptr in, predicate_fn keep);
node_ptr make_shuffle_node(node_ptr in, size_t buffer, uint64_t seed, bool reshuffle);
node_ptr make_batch_node(node_ptr in, int64_t n, bool drop, bool pad, std::vector<shape> shapes);
node_ptr make_bucket_node(node_ptr in, length_fn len, std::vector<int64_t> bounds,
                          std::vector<int64_t> sizes, bool to_boundary);
node_ptr make_repeat_node(node_ptr in, int64_t epochs);
node_ptr make_take_skip_node(node_ptr in, int64_t take, int64_t skip);
node_ptr make_shard_node(node_ptr in, int64_t n, int64_t index);

} // namespace runnel
