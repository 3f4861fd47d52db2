// Dataset sources: tensors, ranges and record files (interleaved shards), with the fused
// records+shuffle and records+batch+parse streams that read records in place.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <span>

#include "runnel/actors/data/autotune.hpp"
#include "runnel/actors/data/record_places.hpp"
#include "runnel/actors/data/stages.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel {
namespace {

class vector_stream : public element_stream {
public:
  explicit vector_stream(std::vector<element> items) : items_(std::move(items)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    for (size_t n = 0; n < max && pos_ < items_.size(); ++n)
      out.push_back(items_[pos_++]); // shares buffers: cheap, and the source stays reusable
    return {};
  }

private:
  std::vector<element> items_;
  size_t pos_ = 0;
};

class tensors_node : public dataset_node {
public:
  explicit tensors_node(std::vector<element> items) : items_(std::move(items)) {}
  std::string describe() const override { return "tensors"; }
  result<stream_ptr> open_stream(open_context&) const override {
    return stream_ptr(std::make_unique<vector_stream>(items_));
  }

private:
  std::vector<element> items_;
};

class range_stream : public element_stream {
public:
  explicit range_stream(int64_t n) : n_(n) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    for (size_t k = 0; k < max && i_ < n_; ++k)
      out.push_back({tensor::scalar<int64_t>(i_++)});
    return {};
  }

private:
  int64_t n_, i_ = 0;
};

class range_node : public dataset_node {
public:
  explicit range_node(int64_t n) : n_(n) {}
  std::string describe() const override { return "range(" + std::to_string(n_) + ")"; }
  result<stream_ptr> open_stream(open_context&) const override {
    return stream_ptr(std::make_unique<range_stream>(n_));
  }

private:
  int64_t n_;
};

/// The records of one file.
class file_stream : public element_stream {
public:
  file_stream(std::string path, record_reader_options o) : path_(std::move(path)), options_(o) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    if (!reader_) {
      auto r = record_reader::open(path_, options_);
      if (!r)
        return r.error();
      reader_.emplace(std::move(r).value());
    }
    for (size_t n = 0; n < max; ++n) {
      std::string rec;
      auto more = reader_->next(rec);
      if (!more)
        return more.error();
      if (!*more)
        break;
      out.push_back({tensor::scalar<std::string>(std::move(rec))});
    }
    return {};
  }

private:
  std::string path_;
  record_reader_options options_;
  std::optional<record_reader> reader_;
};

// ---- records: interleaved shards ----

class records_stream : public element_stream {
public:
  records_stream(open_context ctx, std::vector<std::string> files, records_options o)
      : ctx_(ctx), files_(std::move(files)), options_(o) {
    size_t cycle = options_.cycle_length > 0 ? size_t(options_.cycle_length)
                                             : std::min<size_t>(files_.size(), 8);
    slots_.resize(std::max<size_t>(1, std::min(cycle, files_.size())));
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    while (out.size() - start < max) {
      // Fill empty slots with the next files.
      bool any = false;
      for (auto& s : slots_) {
        if (!s.stream && next_file_ < files_.size())
          open_slot(s);
        any |= bool(s.stream);
      }
      if (!any)
        break;
      auto& s = slots_[current_];
      if (!s.stream) {
        current_ = (current_ + 1) % slots_.size();
        continue;
      }
      if (s.pos >= s.pending.size()) {
        s.pending.clear();
        s.pos = 0;
        status st = s.stream->next_chunk(s.pending, chunk_size);
        if (!st.ok())
          return st;
        if (s.pending.empty()) { // this file is done
          s.stream.reset();
          continue;
        }
      }
      out.push_back(std::move(s.pending[s.pos++]));
      if (++s.taken >= size_t(std::max(1, options_.block_length))) {
        s.taken = 0;
        current_ = (current_ + 1) % slots_.size();
      }
    }
    return {};
  }

private:
  struct slot {
    stream_ptr stream;
    std::vector<element> pending;
    size_t pos = 0;
    size_t taken = 0;
  };
  void open_slot(slot& s) {
    stream_ptr f = std::make_unique<file_stream>(files_[next_file_++], options_.reader);
    // With several shards at once, each is read (and CRC-checked) on its own actor.
    if (slots_.size() > 1)
      f = make_prefetch_stream(ctx_, std::move(f), 4 * chunk_size);
    s.stream = std::move(f);
    s.pending.clear();
    s.pos = 0;
    s.taken = 0;
  }
  open_context ctx_;
  std::vector<std::string> files_;
  records_options options_;
  std::vector<slot> slots_;
  size_t current_ = 0;
  size_t next_file_ = 0;
};

/// records(...).shuffle(n) fused: the window holds the records in an arena of huge pages
/// instead of one string each, and each is copied out once, when it is emitted.
class records_shuffle_stream : public element_stream {
public:
  records_shuffle_stream(std::vector<std::string> files, records_options o, size_t buffer,
                         uint64_t seed)
      : places_(std::move(files), o, buffer, seed) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    picked_.clear();
    RUNNEL_RETURN_IF_ERROR(places_.next(picked_, max));
    for (auto& p : picked_)
      out.push_back({tensor::scalar<std::string>(std::string(p.view()))});
    places_.release(picked_);
    return {};
  }

private:
  record_places places_;
  std::vector<record_place> picked_;
};

/// records()[.shuffle(n)].batch(b).parse_examples(specs) fused: the records are read ahead on
/// workers of their own (given a second core), and each batch's records are
/// parsed on `parallelism` actors straight from the window's arena into the batch's tensors
/// (the only copy after the one into the arena). The same records in the same order as the
/// unfused pipeline. Places go back to the arena on this stream's thread, as batches are
/// handed out.
class records_parse_stream : public element_stream {
public:
  records_parse_stream(open_context& ctx, record_places places, int64_t batch, bool drop,
                       std::shared_ptr<const example_parser> parser, int parallelism)
      : places_(std::move(places)), batch_(size_t(batch)), drop_(drop), parser_(std::move(parser)),
        workers_(ctx, parallelism == dataset::autotune || parallelism > 1 ? parallelism : 0) {}
  int64_t autotuned() const override { return workers_.autotuned(); }
  ~records_parse_stream() override {
    for (auto& t : in_flight_) {
      if (t->claim()) { // not started: nobody needs it parsed any more
        t->finish();
        continue;
      }
      t->wait();
    }
    workers_.stop();
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t limit = std::max<size_t>(1, 4 * workers_.active());
    while (!ended_ && in_flight_.size() < limit) {
      auto t = std::make_shared<task>();
      status st = places_.next(t->places, batch_);
      if (!st.ok()) {
        ended_ = true;
        end_error_ = st;
        break;
      }
      if (t->places.empty() || (drop_ && t->places.size() < batch_)) {
        ended_ = true;
        break;
      }
      if (!workers_.empty())
        workers_.post([t, parser = parser_] {
          if (t->claim()) {
            parse_with(*t, *parser);
            t->finish();
          }
        });
      in_flight_.push_back(std::move(t));
      if (workers_.empty())
        break; // inline: one batch per call
    }
    for (size_t k = 0; k < max && !in_flight_.empty(); ++k) {
      auto& t = in_flight_.front();
      // A batch no worker has started yet is parsed here rather than waited for: this thread
      // would otherwise sleep, and on our VMs a sleep and its wake-up cost more than a batch.
      bool starved = true;
      if (t->claim()) {
        parse_with(*t, *parser_);
        t->finish();
      } else {
        starved = t->wait();
      }
      if (!t->result.ok())
        return t->result;
      workers_.took(starved, 1);
      out.push_back(std::move(t->parsed));
      places_.release(t->places);
      in_flight_.pop_front();
      if (!workers_.empty())
        break; // hand out what is ready; refill on the next call
    }
    if (out.empty() && in_flight_.empty())
      return end_error_;
    return {};
  }

private:
  struct task {
    std::vector<record_place> places;
    element parsed;
    status result;
    std::atomic<bool> claimed{false}; // by the worker it was posted to, or the stream's thread
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;

    bool claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
    void finish() {
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    }
    /// Whether it had to wait.
    bool wait() {
      std::unique_lock lock(mu);
      bool waited = !done;
      cv.wait(lock, [&] { return done; });
      return waited;
    }
  };
  static void parse_with(task& t, const example_parser& parser) {
    std::vector<std::string_view> views;
    views.reserve(t.places.size());
    for (auto& p : t.places)
      views.push_back(p.view());
    t.result = parser.parse_batch(std::span<const std::string_view>(views), t.parsed);
  }

  record_places places_;
  size_t batch_;
  bool drop_;
  std::shared_ptr<const example_parser> parser_;
  stage_workers workers_;
  std::deque<std::shared_ptr<task>> in_flight_;
  bool ended_ = false;
  status end_error_;
};

} // namespace

result<stream_ptr> records_node::open_stream(open_context& ctx) const {
  RUNNEL_ASSIGN_OR_RETURN(auto files, expand());
  return stream_ptr(std::make_unique<records_stream>(ctx, std::move(files), options_));
}

result<std::vector<std::string>> records_node::expand() const {
    std::vector<std::string> files;
    for (auto& p : patterns_) {
      auto matched = expand_record_files(p);
      if (!matched)
        return matched.error();
      files.insert(files.end(), matched->begin(), matched->end());
    }
    if (files.empty())
      return invalid_argument("records(): no files given");
    if (options_.shuffle_files_seed) {
      std::mt19937_64 rng(options_.shuffle_files_seed + opens_++);
      std::shuffle(files.begin(), files.end(), rng);
    }
    return files;
}

node_ptr make_tensors_node(std::vector<element> items) {
  return std::make_shared<tensors_node>(std::move(items));
}

node_ptr make_range_node(int64_t n) {
  return std::make_shared<range_node>(n);
}

stream_ptr make_records_shuffle_stream(std::vector<std::string> files, records_options o,
                                       size_t buffer, uint64_t seed) {
  return std::make_unique<records_shuffle_stream>(std::move(files), o, buffer, seed);
}

stream_ptr make_records_parse_stream(open_context& ctx, std::vector<std::string> files,
                                     records_options o, size_t buffer, uint64_t seed,
                                     int64_t batch, bool drop,
                                     std::shared_ptr<const example_parser> parser,
                                     int parallelism) {
  record_places places(std::move(files), o, buffer, seed);
  // With a second core, the reading (the kernel's copy, the CRCs, the copy into the window)
  // runs on threads of its own, one per shard read at once up to the cores, beside the draws
  // and the parse; it bounded the rate on the stream's thread (docs/input_pipelines.md).
  if (int64_t cores = autotune_thread_budget(); cores >= 2)
    places.read_ahead_on(ctx, size_t(cores));
  return std::make_unique<records_parse_stream>(ctx, std::move(places), batch, drop,
                                                std::move(parser), parallelism);
}

} // namespace runnel
