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
#include "runnel/actors/data/record_arena.hpp"
#include "runnel/actors/data/stages.hpp"
#include "runnel/ops/core/stream_copy.hpp"
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

/// A record read and checked, waiting in a shuffle window: its bytes in the window's arena.
struct record_place {
  char* data = nullptr;
  size_t length = 0;
  std::string_view view() const { return {data, length}; }
};

/// The records of `files`, interleaved like records(), optionally through a shuffle window of
/// `buffer` records (0: in order). Each record is read with its CRCs checked (pread into a
/// reused buffer, so the check runs over bytes still in cache: checked later, from the arena,
/// the same CRC cost four times as much) and copied once into the arena, where it stays until
/// the consumer gives its place back with release(). The copy streams past the caches: the
/// record is read again only after thousands of others, from memory either way, and an
/// ordinary copy would first read each line it overwrites and evict the window's bookkeeping.
class record_places {
public:
  record_places(std::vector<std::string> files, records_options o, size_t buffer, uint64_t seed)
      : files_(std::move(files)), options_(o), capacity_(std::max<size_t>(1, buffer)),
        shuffle_(buffer > 0), rng_(seed) {
    size_t cycle = options_.cycle_length > 0 ? size_t(options_.cycle_length)
                                             : std::min<size_t>(files_.size(), 8);
    slots_.resize(std::max<size_t>(1, std::min(cycle, files_.size())));
  }
  /// Appends up to `n` places; fewer only at the end.
  status next(std::vector<record_place>& out, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      if (status st = fill(); !st.ok()) {
        streaming_fence();
        return st;
      }
      if (buf_.empty())
        break;
      if (shuffle_)
        out.push_back(pick());
      else {
        out.push_back(buf_[head_++]);
        if (head_ == buf_.size()) {
          buf_.clear();
          head_ = 0;
        }
      }
    }
    streaming_fence(); // the places' bytes are in memory before another thread reads them
    return {};
  }
  /// Frees the records of places next() handed out (on the thread that calls next()).
  void release(std::span<const record_place> places) {
    for (auto& p : places)
      arena_.release(p.data, p.length);
  }

private:
  struct slot {
    std::unique_ptr<record_reader> reader;
    size_t taken = 0;
  };
  size_t draw(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  /// Takes a random place out of the full window. The window's places are long out of cache by
  /// the time one is drawn (the records stream through it), so the next draw is made now, when
  /// the next window's size is already known (a record read ahead will fill it again), and its
  /// place fetched while the next record is read: the same draws, in the same order, as drawing
  /// each when it is needed.
  record_place pick() {
    size_t i = drawn_ ? *drawn_ : draw(buf_.size());
    drawn_.reset();
    std::swap(buf_[i], buf_.back());
    record_place p = buf_.back();
    buf_.pop_back();
    if (ahead_.empty())
      read_ahead();
    if (!ahead_.empty() && buf_.size() + 1 == capacity_) {
      drawn_ = draw(capacity_);
      if (*drawn_ < buf_.size())
        __builtin_prefetch(&buf_[*drawn_]);
      read_ahead();
    }
    return p;
  }
  /// Moves records read ahead into the window until it holds what a draw needs (all of it for a
  /// shuffle, one in order); an error is returned where it occurred in the records' order.
  status fill() {
    size_t want = shuffle_ ? capacity_ : 1;
    while (buf_.size() - head_ < want) {
      if (ahead_.empty())
        read_ahead();
      if (ahead_.empty())
        return ahead_error_; // the end, or the error met after the last record read
      buf_.push_back(ahead_.front());
      ahead_.pop_front();
    }
    return {};
  }
  /// Reads one more record into the arena and `ahead_`, unless the end or an error was met.
  void read_ahead() {
    if (ahead_end_ || !ahead_error_.ok())
      return;
    record_place p;
    auto more = read_one(p);
    if (!more)
      ahead_error_ = more.error();
    else if (!*more)
      ahead_end_ = true;
    else
      ahead_.push_back(p);
  }
  /// The next record of the interleaved shards, copied into the arena: true, false at the end.
  result<bool> read_one(record_place& p) {
    for (;;) {
      bool any = false;
      for (auto& s : slots_) {
        if (!s.reader && next_file_ < files_.size()) {
          auto r = record_reader::open(files_[next_file_++], options_.reader);
          if (!r)
            return r.error();
          s.reader = std::make_unique<record_reader>(std::move(r).value());
          s.taken = 0;
        }
        any |= bool(s.reader);
      }
      if (!any)
        return false;
      auto& s = slots_[current_];
      if (!s.reader) {
        current_ = (current_ + 1) % slots_.size();
        continue;
      }
      std::string_view rec;
      RUNNEL_ASSIGN_OR_RETURN(bool more, s.reader->next_view(rec));
      if (!more) {
        s.reader.reset();
        continue;
      }
      p = {arena_.allocate(rec.size()), rec.size()};
      copy_streaming(p.data, rec.data(), rec.size());
      if (++s.taken >= size_t(std::max(1, options_.block_length))) {
        s.taken = 0;
        current_ = (current_ + 1) % slots_.size();
      }
      return true;
    }
  }
  std::vector<std::string> files_;
  records_options options_;
  size_t capacity_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::vector<slot> slots_;
  size_t current_ = 0, next_file_ = 0;
  record_arena arena_;
  std::vector<record_place> buf_;
  size_t head_ = 0;                // in order: the next place to hand out
  std::deque<record_place> ahead_; // read, not yet in the window
  bool ahead_end_ = false;         // the files are done
  status ahead_error_;             // met reading ahead: returned where it occurred
  std::optional<size_t> drawn_;    // the next pick, drawn early
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

/// records()[.shuffle(n)].batch(b).parse_examples(specs) fused: each batch's records are
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
  return std::make_unique<records_parse_stream>(ctx, std::move(places), batch, drop,
                                                std::move(parser), parallelism);
}

} // namespace runnel
