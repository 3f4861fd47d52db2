#pragma once
// Datasets: input pipelines whose stages run on actors with bounded buffers.
//
//   auto ds = dataset::records({"data/train-*-of-00004"})          // shards, interleaved
//                 .shuffle(10'000, /*seed=*/7)                        // serialized records
//                 .batch(100)
//                 .map(parse_examples({{"image", dtype::f32, {784}},  // batch-then-parse
//                                      {"label", dtype::i64, {}}}), /*parallelism=*/2)
//                 .prefetch(4);           // or dataset::autotune for parallelism and buffers
//
//   // Outside a graph:
//   auto reader = ds.open().value();
//   element batch;
//   while (reader->next(batch).value()) { ... }
//
//   // Inside a graph: an IteratorGetNext node reads the runtime's iterator "train", which can be
//   // (re)initialised at any time, e.g. to switch between training and validation data.
//   auto next = iterator_get_next(g, "train", {dtype::f32, dtype::i64}, {{-1, 784}, {-1}});
//   throw_if_error(initialize_iterator(rt, "train", ds));   // a new epoch, or another dataset
//   // session runs that fetch `next` get batches until out_of_range ("end of sequence").
//
// Stages are fused where that costs nothing (map with parallelism 1, filter, shuffle, batch,
// take, skip, repeat run in the thread that pulls them). Stages that overlap work are actors:
// prefetch(n) runs everything upstream on its own actor into a buffer of n elements (the
// producer waits when it is full: back-pressure); map with parallelism p sends chunks of
// elements to p worker actors and keeps their order; records() over several files reads each of
// `cycle_length` shards on its own actor and interleaves them deterministically. Elements move
// between stages in chunks, so a hand-off is paid per chunk, not per record.
//
// A dataset value is an immutable description; copying it is cheap. Errors (a corrupt record, a
// map function's failure) end the stream with that error, naming the file and offset or stage.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runnel/actors/exec/runtime.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel {

/// One element of a dataset: its components.
using element = std::vector<tensor>;
using map_fn = std::function<result<element>(element)>;
using predicate_fn = std::function<result<bool>(const element&)>;
/// The length of an element, for bucketing.
using length_fn = std::function<int64_t(const element&)>;

/// What one stage of an opened dataset has done so far (element_stream::stats()).
struct stage_stats {
  std::string stage;    ///< "records", "batch(100)", "prefetch(4)"; fused stages are one entry
  int64_t elements = 0; ///< handed to the next stage
  int64_t calls = 0;    ///< times the next stage asked it for elements
  /// Time in this stage's own work, on the threads that pulled it: the stages it pulls from on
  /// the same thread are not counted. For prefetch, the time its consumer waited for it.
  double seconds = 0;
  /// Stages that buffer (prefetch): the mean fraction of the buffer that was full when the
  /// consumer took from it (near 1: the consumer is the bottleneck; near 0: the stages before
  /// it are); -1 for the others.
  double buffer_fill = -1;
  /// Stages given dataset::autotune: the parallelism or buffer size chosen so far; -1 for
  /// the others.
  int64_t autotuned = -1;

  /// Elements per second of its own time: how fast this stage alone could go.
  double rate() const { return seconds > 0 ? double(elements) / seconds : 0; }
  /// Mean time of one call.
  double latency() const { return calls > 0 ? seconds / double(calls) : 0; }
};

/// The stages as a table, one line each, source first.
std::string format_stage_stats(const std::vector<stage_stats>& stages);

/// An instance of a dataset being read.
class element_stream {
public:
  virtual ~element_stream() = default;
  /// Appends up to `max` (at least one) elements to `out`; appends none at the end.
  virtual status next_chunk(std::vector<element>& out, size_t max) = 0;
  /// One element: true, false at the end, or the error.
  result<bool> next(element& out);
  /// Like next_chunk, with only what is ready now: nullopt when getting elements would mean
  /// waiting (or the stage cannot tell without waiting).
  virtual std::optional<status> try_next_chunk(std::vector<element>& /*out*/, size_t /*max*/) {
    return std::nullopt;
  }
  /// Like next(), without waiting: nullopt when no element is ready.
  std::optional<result<bool>> try_next(element& out);
  /// Each stage's counters so far, source first (for a stream dataset::open() returned; safe to
  /// call from any thread while another reads the stream).
  virtual std::vector<stage_stats> stats() const { return {}; }
  /// Stages that buffer: the elements held now and the room for them; others {-1, -1}.
  virtual std::pair<int64_t, int64_t> buffer_fill() const { return {-1, -1}; }
  /// Stages given dataset::autotune: the parallelism or buffer size they use now; -1 otherwise.
  virtual int64_t autotuned() const { return -1; }

private:
  std::vector<element> pending_;
  size_t pos_ = 0;
};

struct records_options {
  record_reader_options reader;
  /// Shards read at once (0: all, at most 8). With more than one, each is read on its own actor.
  int cycle_length = 0;
  /// Records taken from one shard before moving to the next.
  int block_length = 1;
  /// Read the shards in a different, seeded order each epoch (0: file order).
  uint64_t shuffle_files_seed = 0;
};

class dataset_node;

class dataset {
public:
  /// For map's and parse_examples' parallelism and prefetch's buffer: chosen while the dataset
  /// is read, from the measured rates (as tf.data.AUTOTUNE). A stage that keeps its consumer
  /// waiting is given a worker more (up to the cores this process may use) or twice the buffer
  /// (up to 64 elements), kept only when the throughput rises by 5%; stats() shows the choice.
  static constexpr int autotune = -1;

  /// Records of files (names, sharded names or globs): each element is one string scalar.
  static dataset records(std::vector<std::string> files, records_options options = {});
  /// One element.
  static dataset from_tensors(element components);
  /// The rows of each component (first dimensions must agree): one element per row.
  static dataset from_tensor_slices(element components);
  /// 0, 1, ..., n-1 as int64 scalars.
  static dataset range(int64_t n);

  /// Applies `fn` to each element, on `parallelism` actors when more than 1 (order is kept), or
  /// on as many as pay for themselves with `autotune`.
  dataset map(map_fn fn, int parallelism = 1) const;
  /// Like map(runnel::parse_examples(specs), parallelism). Directly after
  /// records()[.shuffle(n)].batch(b) it is one stage that reads the files itself and parses
  /// each batch straight from the shuffle window into its tensors: the fast path for training
  /// input (docs/input_pipelines.md).
  dataset parse_examples(std::vector<feature_spec> specs, int parallelism = 1) const;
  dataset filter(predicate_fn keep) const;
  /// Shuffles within a window of `buffer` elements; seed 0 draws a random seed.
  dataset shuffle(size_t buffer, uint64_t seed = 0, bool reshuffle_each_iteration = true) const;
  /// Stacks `n` elements; the last batch may be smaller unless `drop_remainder`.
  dataset batch(int64_t n, bool drop_remainder = false) const;
  /// Like batch, padding components with zeros (empty strings) to the longest in the batch, or
  /// to `padded_shapes` where they give a dimension.
  dataset padded_batch(int64_t n, std::vector<shape> padded_shapes = {},
                       bool drop_remainder = false) const;
  /// Groups elements by `length` into buckets [0, b0), [b0, b1), ..., [b_last, inf) and batches
  /// each bucket with its own size (`batch_sizes` has one more entry than `boundaries`), padding
  /// to the longest in the batch or, with `pad_to_bucket_boundary`, to the bucket's boundary - 1.
  dataset bucket_by_length(length_fn length, std::vector<int64_t> boundaries,
                           std::vector<int64_t> batch_sizes,
                           bool pad_to_bucket_boundary = false) const;
  /// Repeats the dataset `epochs` times (-1: forever).
  dataset repeat(int64_t epochs = -1) const;
  dataset take(int64_t n) const;
  dataset skip(int64_t n) const;
  /// Every n-th element starting at `index` (0 <= index < n): one worker's share of the data when
  /// n workers read the same files in the same order.
  dataset shard(int64_t n, int64_t index) const;
  /// Produces up to `n` elements ahead, on its own actor (`autotune`: a buffer that grows
  /// while its consumer waits and growing it pays).
  dataset prefetch(int64_t n) const;

  /// Starts reading the dataset (stages that are actors start on `rt`'s actor system, or on a
  /// private one when `rt` is null).
  result<std::unique_ptr<element_stream>> open(runtime* rt = nullptr) const;

  std::shared_ptr<const dataset_node> node() const { return node_; }
  explicit dataset(std::shared_ptr<const dataset_node> n) : node_(std::move(n)) {}

private:
  std::shared_ptr<const dataset_node> node_;
};

/// A map function parsing serialized Examples: a string scalar gives one tensor per output of
/// example_parser (see storage/example_parse.hpp), a string vector (after batch) a batch of them.
map_fn parse_examples(std::vector<feature_spec> specs);

/// (Re)initialises the runtime's iterator `name` with `ds`: the IteratorGetNext nodes that name
/// it, on whichever device they run, read `ds` from its start. Iterators are runtime-wide
/// (one per name).
status initialize_iterator(runtime& rt, const std::string& name, const dataset& ds);

/// What the runtime's iterator `name` has served since it was last initialised.
struct iterator_stats {
  int64_t elements = 0;            ///< handed to IteratorGetNext nodes
  double wait_seconds = 0;         ///< their time from asking for an element to getting it
  std::vector<stage_stats> stages; ///< the dataset's stages
};
/// An error when no iterator of that name was initialised.
result<iterator_stats> get_iterator_stats(runtime& rt, const std::string& name);

} // namespace runnel
