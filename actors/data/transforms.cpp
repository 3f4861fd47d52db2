// Dataset transformations: map, parse_examples (fused with records and batch where it can),
// filter, shuffle, batch, padded_batch, bucket_by_length, repeat, take, skip, shard. They run in
// the thread that pulls them.
#include <algorithm>
#include <optional>
#include <random>

#include "runnel/actors/data/autotune.hpp"
#include "runnel/actors/data/stages.hpp"
#include "runnel/ops/kernel/queue.hpp"

namespace runnel {
namespace {

class map_node : public unary_node {
public:
  map_node(node_ptr in, map_fn fn, int p)
      : unary_node(std::move(in)), fn_(std::move(fn)), parallelism_(p) {}
  std::string describe() const override {
    return parallelism_ > 1 || parallelism_ == dataset::autotune
               ? "map(parallelism " + autotune_label(parallelism_) + ")"
               : "map";
  }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return make_map_stream(ctx, std::move(up), fn_, parallelism_);
  }

private:
  map_fn fn_;
  int parallelism_;
};

class filter_stream : public element_stream {
public:
  filter_stream(stream_ptr in, predicate_fn keep) : in_(std::move(in)), keep_(std::move(keep)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    while (out.size() == start) {
      std::vector<element> c;
      RUNNEL_RETURN_IF_ERROR(in_->next_chunk(c, max));
      if (c.empty())
        return {};
      for (auto& e : c) {
        auto k = keep_(e);
        if (!k)
          return k.error().with_context("filter");
        if (*k)
          out.push_back(std::move(e));
      }
    }
    return {};
  }

private:
  stream_ptr in_;
  predicate_fn keep_;
};

class filter_node : public unary_node {
public:
  filter_node(node_ptr in, predicate_fn f)
      : unary_node(std::move(in)), keep_(std::move(f)) {}
  std::string describe() const override { return "filter"; }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<filter_stream>(std::move(up), keep_));
  }

private:
  predicate_fn keep_;
};

// ---- shuffle ----

class shuffle_stream : public element_stream {
public:
  shuffle_stream(stream_ptr in, size_t buffer, uint64_t seed)
      : in_(std::move(in)), capacity_(std::max<size_t>(1, buffer)), rng_(seed) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    for (size_t n = 0; n < max; ++n) {
      while (!ended_ && buf_.size() < capacity_) {
        std::vector<element> c;
        RUNNEL_RETURN_IF_ERROR(in_->next_chunk(c, std::min(chunk_size, capacity_ - buf_.size())));
        if (c.empty())
          ended_ = true;
        for (auto& e : c)
          buf_.push_back(std::move(e));
      }
      if (buf_.empty())
        break;
      size_t i = std::uniform_int_distribution<size_t>(0, buf_.size() - 1)(rng_);
      std::swap(buf_[i], buf_.back());
      out.push_back(std::move(buf_.back()));
      buf_.pop_back();
    }
    return {};
  }

private:
  stream_ptr in_;
  size_t capacity_;
  std::mt19937_64 rng_;
  std::vector<element> buf_;
  bool ended_ = false;
};

class shuffle_node : public unary_node {
public:
  shuffle_node(node_ptr in, size_t buffer, uint64_t seed, bool reshuffle)
      : unary_node(std::move(in)), buffer_(buffer),
        seed_(seed ? seed : std::random_device{}()), reshuffle_(reshuffle) {}
  std::string describe() const override { return "shuffle(" + std::to_string(buffer_) + ")"; }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    uint64_t seed = next_seed();
    // Straight after records(): shuffle places in the files rather than payloads.
    if (auto* records = dynamic_cast<const records_node*>(input_.get());
        records && !records->options().reader.skip_corrupt) {
      RUNNEL_ASSIGN_OR_RETURN(auto files, records->expand());
      return make_records_shuffle_stream(std::move(files), records->options(), buffer_, seed);
    }
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<shuffle_stream>(std::move(up), buffer_, seed));
  }
  size_t buffer() const { return buffer_; }
  /// The seed of the next pass (advances it when reshuffling each iteration).
  uint64_t next_seed() const { return reshuffle_ ? seed_ + 0x9e3779b97f4a7c15ull * opens_++ : seed_; }

private:
  size_t buffer_;
  uint64_t seed_;
  bool reshuffle_;
  mutable std::atomic<uint64_t> opens_{0};
};

// ---- batching ----

/// Stacks component `c` of `items`; string components are moved when nobody else holds them.
result<tensor> stack_component(std::vector<element>& items, size_t c, bool pad,
                               const shape& pad_shape) {
  const tensor& first = items[0][c];
  bool same = true;
  for (auto& e : items)
    same &= e[c].shape() == first.shape() && e[c].type() == first.type();
  bool fits = !pad || !pad_shape.has_known_rank() || pad_shape == first.shape();
  if (first.type() == dtype::string && same && fits) {
    std::vector<int64_t> dims{int64_t(items.size())};
    dims.insert(dims.end(), first.shape().dims().begin(), first.shape().dims().end());
    tensor out(dtype::string, shape(std::move(dims)));
    int64_t per = first.num_elements();
    auto* dst = out.data<std::string>();
    for (size_t i = 0; i < items.size(); ++i) {
      tensor& t = items[i][c];
      auto* src = t.data<std::string>();
      bool own = t.is_unique();
      for (int64_t k = 0; k < per; ++k)
        dst[int64_t(i) * per + k] = own ? std::move(src[k]) : src[k];
    }
    return out;
  }
  std::vector<tensor> parts;
  parts.reserve(items.size());
  for (auto& e : items)
    parts.push_back(e[c]);
  return stack_tensors(parts, pad, pad_shape);
}

result<element> stack_elements(std::vector<element>& items, bool pad,
                               const std::vector<shape>& pad_shapes) {
  size_t k = items[0].size();
  for (size_t i = 1; i < items.size(); ++i)
    if (items[i].size() != k)
      return invalid_argument("batch: elements have " + std::to_string(k) + " and " +
                              std::to_string(items[i].size()) + " components");
  element out;
  for (size_t c = 0; c < k; ++c) {
    auto t = stack_component(items, c, pad, c < pad_shapes.size() ? pad_shapes[c] : shape::unknown());
    if (!t)
      return t.error().with_context("batch component " + std::to_string(c));
    out.push_back(std::move(t).value());
  }
  return out;
}

class batch_stream : public element_stream {
public:
  batch_stream(stream_ptr in, int64_t n, bool drop, bool pad, std::vector<shape> shapes)
      : in_(std::move(in)), n_(size_t(n)), drop_(drop), pad_(pad), shapes_(std::move(shapes)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    for (size_t b = 0; b < max && !ended_; ++b) {
      while (pending_.size() < n_) {
        size_t before = pending_.size();
        RUNNEL_RETURN_IF_ERROR(in_->next_chunk(pending_, n_ - pending_.size()));
        if (pending_.size() == before) {
          ended_ = true;
          break;
        }
      }
      if (pending_.empty() || (pending_.size() < n_ && drop_))
        break;
      auto batch = stack_elements(pending_, pad_, shapes_);
      pending_.clear();
      if (!batch)
        return batch.error();
      out.push_back(std::move(batch).value());
    }
    return {};
  }

private:
  stream_ptr in_;
  size_t n_;
  bool drop_, pad_;
  std::vector<shape> shapes_;
  std::vector<element> pending_;
  bool ended_ = false;
};

class batch_node : public unary_node {
public:
  batch_node(node_ptr in, int64_t n, bool drop, bool pad,
             std::vector<shape> shapes)
      : unary_node(std::move(in)), n_(n), drop_(drop), pad_(pad), shapes_(std::move(shapes)) {}
  std::string describe() const override {
    return (pad_ ? "padded_batch(" : "batch(") + std::to_string(n_) + ")";
  }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<batch_stream>(std::move(up), n_, drop_, pad_, shapes_));
  }
  int64_t size() const { return n_; }
  bool drop_remainder() const { return drop_; }
  bool padded() const { return pad_; }

private:
  int64_t n_;
  bool drop_, pad_;
  std::vector<shape> shapes_;
};

class bucket_stream : public element_stream {
public:
  bucket_stream(stream_ptr in, length_fn len, std::vector<int64_t> bounds,
                std::vector<int64_t> sizes, bool to_boundary)
      : in_(std::move(in)), len_(std::move(len)), bounds_(std::move(bounds)),
        sizes_(std::move(sizes)), to_boundary_(to_boundary), buckets_(sizes_.size()) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    while (out.size() - start < max) {
      if (ended_) {
        // Flush partial buckets, smallest boundary first.
        while (flush_ < buckets_.size() && buckets_[flush_].empty())
          ++flush_;
        if (flush_ == buckets_.size())
          break;
        RUNNEL_RETURN_IF_ERROR(emit(flush_, out));
        continue;
      }
      std::vector<element> c;
      RUNNEL_RETURN_IF_ERROR(in_->next_chunk(c, chunk_size));
      if (c.empty()) {
        ended_ = true;
        continue;
      }
      for (auto& e : c) {
        int64_t l = len_(e);
        size_t b = size_t(std::upper_bound(bounds_.begin(), bounds_.end(), l) - bounds_.begin());
        buckets_[b].push_back(std::move(e));
        if (int64_t(buckets_[b].size()) >= sizes_[b])
          RUNNEL_RETURN_IF_ERROR(emit(b, out));
      }
    }
    return {};
  }

private:
  status emit(size_t b, std::vector<element>& out) {
    std::vector<shape> pad;
    if (to_boundary_ && b < bounds_.size()) {
      // Pad the first dimension of each component to the bucket's boundary - 1.
      for (auto& t : buckets_[b][0]) {
        std::vector<int64_t> dims = t.shape().dims();
        if (!dims.empty())
          dims[0] = bounds_[b] - 1;
        for (size_t d = 1; d < dims.size(); ++d)
          dims[d] = -1;
        pad.emplace_back(std::move(dims));
      }
    }
    auto batch = stack_elements(buckets_[b], true, pad);
    buckets_[b].clear();
    if (!batch)
      return batch.error().with_context("bucket " + std::to_string(b));
    out.push_back(std::move(batch).value());
    return {};
  }
  stream_ptr in_;
  length_fn len_;
  std::vector<int64_t> bounds_, sizes_;
  bool to_boundary_;
  std::vector<std::vector<element>> buckets_;
  bool ended_ = false;
  size_t flush_ = 0;
};

class bucket_node : public unary_node {
public:
  bucket_node(node_ptr in, length_fn len, std::vector<int64_t> bounds,
              std::vector<int64_t> sizes, bool to_boundary)
      : unary_node(std::move(in)), len_(std::move(len)), bounds_(std::move(bounds)),
        sizes_(std::move(sizes)), to_boundary_(to_boundary) {}
  std::string describe() const override { return "bucket_by_length"; }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(
        std::make_unique<bucket_stream>(std::move(up), len_, bounds_, sizes_, to_boundary_));
  }

private:
  length_fn len_;
  std::vector<int64_t> bounds_, sizes_;
  bool to_boundary_;
};

/// parse_examples(specs) as a stage: map(parse_examples) unless it directly follows
/// records()[.shuffle(n)].batch(b) (unpadded), which it then parses in place.
class parse_node : public unary_node {
public:
  parse_node(node_ptr in, std::vector<feature_spec> specs, int p)
      : unary_node(std::move(in)),
        parser_(std::make_shared<example_parser>(example_parser::create(specs).value())),
        fallback_(parse_examples(std::move(specs))), parallelism_(p) {}
  result<stream_ptr> open_stream(open_context& ctx) const override {
    if (auto f = fusable()) {
      RUNNEL_ASSIGN_OR_RETURN(auto files, f->records->expand());
      return make_records_parse_stream(ctx, std::move(files), f->records->options(),
                                       f->shuffle ? f->shuffle->buffer() : 0,
                                       f->shuffle ? f->shuffle->next_seed() : 0, f->batch->size(),
                                       f->batch->drop_remainder(), parser_, parallelism_);
    }
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return make_map_stream(ctx, std::move(up), fallback_, parallelism_);
  }
  std::string describe() const override {
    std::string self = "parse_examples";
    if (parallelism_ > 1 || parallelism_ == dataset::autotune)
      self += "(parallelism " + autotune_label(parallelism_) + ")";
    auto f = fusable();
    if (!f)
      return self;
    return "records" +
           (f->shuffle ? " -> shuffle(" + std::to_string(f->shuffle->buffer()) + ")" : "") +
           " -> batch(" + std::to_string(f->batch->size()) + ") -> " + self + ", fused";
  }

private:
  struct fused_chain {
    const records_node* records;
    const shuffle_node* shuffle; // or null
    const batch_node* batch;
  };
  /// records()[.shuffle(n)].batch(b) (unpadded, corrupt records not skipped) right below.
  std::optional<fused_chain> fusable() const {
    auto* b = dynamic_cast<const batch_node*>(input_.get());
    if (!b || b->padded())
      return std::nullopt;
    const dataset_node* below = b->input();
    auto* sh = dynamic_cast<const shuffle_node*>(below);
    auto* rec = dynamic_cast<const records_node*>(sh ? sh->input() : below);
    if (!rec || rec->options().reader.skip_corrupt)
      return std::nullopt;
    return fused_chain{rec, sh, b};
  }
  std::shared_ptr<const example_parser> parser_;
  map_fn fallback_;
  int parallelism_;
};

// ---- repeat, take, skip ----

class repeat_stream : public element_stream {
public:
  repeat_stream(open_context ctx, node_ptr node, int64_t epochs)
      : ctx_(ctx), node_(std::move(node)), epochs_(epochs) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    while (out.size() == start) {
      if (!in_) {
        if (epochs_ >= 0 && epoch_ >= epochs_)
          return {};
        RUNNEL_ASSIGN_OR_RETURN(in_, node_->open(ctx_));
        ++epoch_;
        produced_this_epoch_ = false;
      }
      RUNNEL_RETURN_IF_ERROR(in_->next_chunk(out, max));
      if (out.size() == start) {
        in_.reset();
        if (!produced_this_epoch_)
          return {}; // an empty dataset repeated is empty, not an endless loop
      } else {
        produced_this_epoch_ = true;
      }
    }
    return {};
  }

private:
  open_context ctx_;
  node_ptr node_;
  int64_t epochs_;
  int64_t epoch_ = 0;
  bool produced_this_epoch_ = false;
  stream_ptr in_;
};

class repeat_node : public unary_node {
public:
  repeat_node(node_ptr in, int64_t e) : unary_node(std::move(in)), epochs_(e) {}
  std::string describe() const override {
    return epochs_ < 0 ? "repeat" : "repeat(" + std::to_string(epochs_) + ")";
  }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    return stream_ptr(std::make_unique<repeat_stream>(ctx, input_, epochs_));
  }

private:
  int64_t epochs_;
};

class take_skip_stream : public element_stream {
public:
  take_skip_stream(stream_ptr in, int64_t take, int64_t skip)
      : in_(std::move(in)), left_(take), skip_(skip) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    while (skip_ > 0) {
      std::vector<element> c;
      RUNNEL_RETURN_IF_ERROR(in_->next_chunk(c, size_t(std::min<int64_t>(skip_, chunk_size))));
      if (c.empty())
        return {};
      skip_ -= int64_t(c.size());
    }
    if (left_ == 0)
      return {};
    size_t want = left_ < 0 ? max : std::min(max, size_t(left_));
    size_t start = out.size();
    RUNNEL_RETURN_IF_ERROR(in_->next_chunk(out, want));
    if (left_ > 0)
      left_ -= int64_t(out.size() - start);
    return {};
  }

private:
  stream_ptr in_;
  int64_t left_; // -1: all
  int64_t skip_;
};

class take_skip_node : public unary_node {
public:
  take_skip_node(node_ptr in, int64_t take, int64_t skip)
      : unary_node(std::move(in)), take_(take), skip_(skip) {}
  std::string describe() const override {
    return take_ >= 0 ? "take(" + std::to_string(take_) + ")"
                      : "skip(" + std::to_string(skip_) + ")";
  }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<take_skip_stream>(std::move(up), take_, skip_));
  }

private:
  int64_t take_, skip_;
};

/// Keeps elements index, index + n, index + 2n, ... (tf.data's shard).
class shard_stream : public element_stream {
public:
  shard_stream(stream_ptr in, int64_t n, int64_t index) : in_(std::move(in)), n_(n), next_(index) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    while (out.size() == start) {
      std::vector<element> c;
      RUNNEL_RETURN_IF_ERROR(in_->next_chunk(c, max)); // keeps at most max of them
      if (c.empty())
        return {};
      for (auto& e : c) {
        if (seen_ == next_) {
          out.push_back(std::move(e));
          next_ += n_;
        }
        ++seen_;
      }
    }
    return {};
  }

private:
  stream_ptr in_;
  int64_t n_, next_, seen_ = 0;
};

class shard_node : public unary_node {
public:
  shard_node(node_ptr in, int64_t n, int64_t index)
      : unary_node(std::move(in)), n_(n), index_(index) {}
  std::string describe() const override {
    return "shard(" + std::to_string(n_) + ", " + std::to_string(index_) + ")";
  }
  result<stream_ptr> open_stream(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<shard_stream>(std::move(up), n_, index_));
  }

private:
  int64_t n_, index_;
};

} // namespace

node_ptr make_map_node(node_ptr in, map_fn fn, int parallelism) {
  return std::make_shared<map_node>(std::move(in), std::move(fn), parallelism);
}
node_ptr make_parse_node(node_ptr in, std::vector<feature_spec> specs, int parallelism) {
  return std::make_shared<parse_node>(std::move(in), std::move(specs), parallelism);
}
node_ptr make_filter_node(node_ptr in, predicate_fn keep) {
  return std::make_shared<filter_node>(std::move(in), std::move(keep));
}
node_ptr make_shuffle_node(node_ptr in, size_t buffer, uint64_t seed, bool reshuffle) {
  return std::make_shared<shuffle_node>(std::move(in), buffer, seed, reshuffle);
}
node_ptr make_batch_node(node_ptr in, int64_t n, bool drop, bool pad, std::vector<shape> shapes) {
  return std::make_shared<batch_node>(std::move(in), n, drop, pad, std::move(shapes));
}
node_ptr make_bucket_node(node_ptr in, length_fn len, std::vector<int64_t> bounds,
                          std::vector<int64_t> sizes, bool to_boundary) {
  return std::make_shared<bucket_node>(std::move(in), std::move(len), std::move(bounds),
                                       std::move(sizes), to_boundary);
}
node_ptr make_repeat_node(node_ptr in, int64_t epochs) {
  return std::make_shared<repeat_node>(std::move(in), epochs);
}
node_ptr make_take_skip_node(node_ptr in, int64_t take, int64_t skip) {
  return std::make_shared<take_skip_node>(std::move(in), take, skip);
}
node_ptr make_shard_node(node_ptr in, int64_t n, int64_t index) {
  return std::make_shared<shard_node>(std::move(in), n, index);
}

} // namespace runnel
