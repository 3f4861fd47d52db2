// Dataset stages, their actors, and the iterator resource behind IteratorGetNext.
#include "runnel/actors/dataset.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <random>

#include "runnel/actors/internal.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel {

using task_atom = caf::atom_constant<caf::atom("dstask")>;
using task_ptr = std::shared_ptr<std::function<void()>>;

} // namespace runnel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(runnel::task_ptr)

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

/// How a stage instance starts actors.
struct open_context {
  caf::actor_system* sys = nullptr;
};

class dataset_node {
public:
  virtual ~dataset_node() = default;
  virtual result<std::unique_ptr<element_stream>> open(open_context& ctx) const = 0;
};

namespace {

using stream_ptr = std::unique_ptr<element_stream>;
constexpr size_t chunk_size = 64;

/// A detached actor (its own thread, so it may block) that runs the tasks sent to it.
caf::actor spawn_worker(caf::actor_system& sys) {
  // (The unused argument: CAF 0.17 dereferences a null tuple for argument-less function actors,
  // which UBSan reports.)
  return sys.spawn<caf::detached>(
      [](caf::event_based_actor*, int) -> caf::behavior {
        return {[](task_atom, task_ptr& t) { (*t)(); }};
      },
      0);
}

void run_on(const caf::actor& worker, std::function<void()> fn) {
  caf::anon_send(worker, task_atom::value, std::make_shared<std::function<void()>>(std::move(fn)));
}

caf::actor_system& private_system() {
  // Leaked on purpose: dataset actors may still be finishing during static destruction.
  static caf::actor_system* sys = [] {
    static caf::actor_system_config cfg; // NOLINT: lives as long as the system
    configure_scheduler(cfg, 1);
    return new caf::actor_system(cfg);
  }();
  return *sys;
}

// ---- sources ----

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
  result<stream_ptr> open(open_context&) const override {
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
  result<stream_ptr> open(open_context&) const override {
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

// ---- prefetch: an actor filling a bounded buffer ----

struct chunk_buffer {
  std::mutex mu;
  std::condition_variable can_put, can_take;
  std::deque<std::vector<element>> chunks;
  size_t count = 0;
  size_t capacity = 1;
  bool finished = false; // the producer is done (end or error)
  bool cancelled = false;
  status error;
};

class prefetch_stream : public element_stream {
public:
  prefetch_stream(caf::actor_system& sys, stream_ptr upstream, size_t capacity)
      : buf_(std::make_shared<chunk_buffer>()) {
    buf_->capacity = std::max<size_t>(1, capacity);
    worker_ = spawn_worker(sys);
    auto buf = buf_;
    size_t chunk = std::min(chunk_size, buf_->capacity);
    // The producer owns the upstream stages and runs them until the end, an error, or a cancel.
    run_on(worker_, [buf, chunk, up = std::shared_ptr<element_stream>(std::move(upstream))] {
      for (;;) {
        std::vector<element> c;
        status st = up->next_chunk(c, chunk);
        std::unique_lock lock(buf->mu);
        if (!st.ok() || c.empty()) {
          buf->error = st;
          buf->finished = true;
          buf->can_take.notify_all();
          return;
        }
        buf->can_put.wait(lock, [&] { return buf->cancelled || buf->count < buf->capacity; });
        if (buf->cancelled)
          return;
        buf->count += c.size();
        buf->chunks.push_back(std::move(c));
        buf->can_take.notify_one();
      }
    });
  }
  ~prefetch_stream() override {
    {
      std::lock_guard lock(buf_->mu);
      buf_->cancelled = true;
      buf_->chunks.clear();
    }
    buf_->can_put.notify_all();
    caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown);
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    std::unique_lock lock(buf_->mu);
    buf_->can_take.wait(lock, [&] { return !buf_->chunks.empty() || buf_->finished; });
    if (buf_->chunks.empty())
      return buf_->error;
    auto& front = buf_->chunks.front();
    if (front.size() <= max && out.empty()) {
      out = std::move(front);
      buf_->chunks.pop_front();
    } else {
      size_t n = std::min(max, front.size());
      std::move(front.begin(), front.begin() + long(n), std::back_inserter(out));
      front.erase(front.begin(), front.begin() + long(n));
      if (front.empty())
        buf_->chunks.pop_front();
    }
    buf_->count -= std::min(buf_->count, out.size());
    lock.unlock();
    buf_->can_put.notify_one();
    return {};
  }

private:
  std::shared_ptr<chunk_buffer> buf_;
  caf::actor worker_;
};

class unary_node : public dataset_node {
public:
  explicit unary_node(std::shared_ptr<const dataset_node> input) : input_(std::move(input)) {}

protected:
  result<stream_ptr> open_input(open_context& ctx) const { return input_->open(ctx); }
  std::shared_ptr<const dataset_node> input_;
};

class prefetch_node : public unary_node {
public:
  prefetch_node(std::shared_ptr<const dataset_node> in, int64_t n) : unary_node(std::move(in)), n_(n) {}
  result<stream_ptr> open(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<prefetch_stream>(*ctx.sys, std::move(up), size_t(n_)));
  }

private:
  int64_t n_;
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
      f = std::make_unique<prefetch_stream>(*ctx_.sys, std::move(f), 4 * chunk_size);
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

class records_node : public dataset_node {
public:
  records_node(std::vector<std::string> patterns, records_options o)
      : patterns_(std::move(patterns)), options_(o) {}
  result<stream_ptr> open(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto files, expand());
    return stream_ptr(std::make_unique<records_stream>(ctx, std::move(files), options_));
  }
  /// The files of one pass, in the order they are opened.
  result<std::vector<std::string>> expand() const {
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
  const records_options& options() const { return options_; }

private:
  std::vector<std::string> patterns_;
  records_options options_;
  mutable std::atomic<uint64_t> opens_{0};
};

/// Where a record lies: in a mapped file (reader, offset, length), or, for compressed files,
/// which cannot be addressed, the record itself.
struct record_place {
  std::shared_ptr<record_reader> reader;
  uint64_t offset = 0, length = 0;
  std::string value;

  /// The record's bytes after checking its CRC (a mapped record is checked here; a read one
  /// was checked when it was read). Valid while this place lives.
  result<std::string_view> view() const {
    if (!reader)
      return std::string_view(value);
    return reader->checked_view(offset, length);
  }
};

/// The places of the records of `files`, interleaved like records(), optionally through a
/// shuffle window of `buffer` places (0: in order).
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
      RUNNEL_RETURN_IF_ERROR(fill());
      if (buf_.empty())
        break;
      size_t i = shuffle_ ? std::uniform_int_distribution<size_t>(0, buf_.size() - 1)(rng_)
                          : head_;
      if (shuffle_) {
        std::swap(buf_[i], buf_.back());
        out.push_back(std::move(buf_.back()));
        buf_.pop_back();
      } else {
        out.push_back(std::move(buf_[head_++]));
        if (head_ == buf_.size()) {
          buf_.clear();
          head_ = 0;
        }
      }
    }
    return {};
  }

private:
  struct slot {
    std::shared_ptr<record_reader> reader;
    size_t taken = 0;
  };
  status fill() {
    size_t want = shuffle_ ? capacity_ : 1;
    while (!ended_ && buf_.size() - head_ < want) {
      bool any = false;
      for (auto& s : slots_) {
        if (!s.reader && next_file_ < files_.size()) {
          auto r = record_reader::open(files_[next_file_++], options_.reader);
          if (!r)
            return r.error();
          s.reader = std::make_shared<record_reader>(std::move(r).value());
          s.taken = 0;
        }
        any |= bool(s.reader);
      }
      if (!any) {
        ended_ = true;
        break;
      }
      auto& s = slots_[current_];
      if (!s.reader) {
        current_ = (current_ + 1) % slots_.size();
        continue;
      }
      record_place p;
      bool more;
      if (s.reader->mapped()) {
        RUNNEL_ASSIGN_OR_RETURN(more, s.reader->next_span(p.offset, p.length));
        p.reader = s.reader;
      } else {
        RUNNEL_ASSIGN_OR_RETURN(more, s.reader->next(p.value));
      }
      if (!more) {
        s.reader.reset(); // places still buffered keep the file mapped
        continue;
      }
      buf_.push_back(std::move(p));
      if (++s.taken >= size_t(std::max(1, options_.block_length))) {
        s.taken = 0;
        current_ = (current_ + 1) % slots_.size();
      }
    }
    return {};
  }
  std::vector<std::string> files_;
  records_options options_;
  size_t capacity_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::vector<slot> slots_;
  size_t current_ = 0, next_file_ = 0;
  std::vector<record_place> buf_;
  size_t head_ = 0; // in order: the next place to hand out
  bool ended_ = false;
};

/// records(...).shuffle(n) fused: the buffer holds where records lie in the mapped files, not
/// their payloads, so a 10k-record window costs 10k small entries instead of 10k strings copied
/// in and read back cold. Each record is copied out (and its CRC checked) once, when it is
/// emitted.
class records_shuffle_stream : public element_stream {
public:
  records_shuffle_stream(std::vector<std::string> files, records_options o, size_t buffer,
                         uint64_t seed)
      : places_(std::move(files), o, buffer, seed) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    picked_.clear();
    RUNNEL_RETURN_IF_ERROR(places_.next(picked_, max));
    for (auto& p : picked_) {
      std::string rec;
      if (p.reader)
        RUNNEL_RETURN_IF_ERROR(p.reader->read_span(p.offset, p.length, rec));
      else
        rec = std::move(p.value);
      out.push_back({tensor::scalar<std::string>(std::move(rec))});
    }
    return {};
  }

private:
  record_places places_;
  std::vector<record_place> picked_;
};

/// records()[.shuffle(n)].batch(b).parse_examples(specs) fused: each batch's records are
/// parsed straight from the mapped files (CRC checked in place), on `parallelism` actors, with
/// no copy of any record. The same records in the same order as the unfused pipeline.
class records_parse_stream : public element_stream {
public:
  records_parse_stream(caf::actor_system& sys, record_places places, int64_t batch, bool drop,
                       std::shared_ptr<const example_parser> parser, int parallelism)
      : places_(std::move(places)), batch_(size_t(batch)), drop_(drop),
        parser_(std::move(parser)) {
    for (int i = 0; i < parallelism && parallelism > 1; ++i)
      workers_.push_back(spawn_worker(sys));
  }
  ~records_parse_stream() override {
    for (auto& t : in_flight_) {
      std::unique_lock lock(t->mu);
      t->cv.wait(lock, [&] { return t->done; });
    }
    for (auto& w : workers_)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t limit = std::max<size_t>(1, 4 * workers_.size());
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
      if (workers_.empty()) {
        parse(*t);
        t->done = true;
      } else {
        run_on(workers_[next_worker_++ % workers_.size()], [t, parser = parser_] {
          parse_with(*t, *parser);
          std::lock_guard lock(t->mu);
          t->done = true;
          t->cv.notify_all();
        });
      }
      in_flight_.push_back(std::move(t));
      if (workers_.empty())
        break; // inline: one batch per call
    }
    for (size_t k = 0; k < max && !in_flight_.empty(); ++k) {
      auto& t = in_flight_.front();
      {
        std::unique_lock lock(t->mu);
        t->cv.wait(lock, [&] { return t->done; });
      }
      if (!t->result.ok())
        return t->result;
      out.push_back(std::move(t->parsed));
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
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  static void parse_with(task& t, const example_parser& parser) {
    std::vector<std::string_view> views;
    views.reserve(t.places.size());
    for (auto& p : t.places) {
      auto v = p.view();
      if (!v) {
        t.result = v.error();
        return;
      }
      views.push_back(*v);
    }
    t.result = parser.parse_batch(std::span<const std::string_view>(views), t.parsed);
    t.places.clear(); // release the mappings early
  }
  void parse(task& t) { parse_with(t, *parser_); }

  record_places places_;
  size_t batch_;
  bool drop_;
  std::shared_ptr<const example_parser> parser_;
  std::vector<caf::actor> workers_;
  std::deque<std::shared_ptr<task>> in_flight_;
  size_t next_worker_ = 0;
  bool ended_ = false;
  status end_error_;
};

// ---- map, filter ----

class map_stream : public element_stream {
public:
  map_stream(stream_ptr in, map_fn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    size_t start = out.size();
    RUNNEL_RETURN_IF_ERROR(in_->next_chunk(out, max));
    for (size_t i = start; i < out.size(); ++i) {
      auto r = fn_(std::move(out[i]));
      if (!r)
        return r.error().with_context("map");
      out[i] = std::move(r).value();
    }
    return {};
  }

private:
  stream_ptr in_;
  map_fn fn_;
};

/// Chunks pulled in order, mapped on worker actors, handed out in order.
class parallel_map_stream : public element_stream {
public:
  parallel_map_stream(caf::actor_system& sys, stream_ptr in, map_fn fn, int parallelism)
      : in_(std::move(in)), fn_(std::make_shared<map_fn>(std::move(fn))) {
    for (int i = 0; i < parallelism; ++i)
      workers_.push_back(spawn_worker(sys));
  }
  ~parallel_map_stream() override {
    for (auto& t : in_flight_) { // workers still hold tasks: wait so nothing outlives its data
      std::unique_lock lock(t->mu);
      t->cv.wait(lock, [&] { return t->done; });
    }
    for (auto& w : workers_)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  }
  status next_chunk(std::vector<element>& out, size_t max) override {
    // Keep two chunks per worker in flight.
    while (!ended_ && in_flight_.size() < 2 * workers_.size()) {
      auto t = std::make_shared<task>();
      status st = in_->next_chunk(t->items, std::min(max, chunk_size));
      if (!st.ok()) {
        ended_ = true;
        end_error_ = st;
        break;
      }
      if (t->items.empty()) {
        ended_ = true;
        break;
      }
      run_on(workers_[next_worker_++ % workers_.size()], [t, fn = fn_] {
        status st;
        for (auto& e : t->items) {
          auto r = (*fn)(std::move(e));
          if (!r) {
            st = r.error().with_context("map");
            break;
          }
          e = std::move(r).value();
        }
        std::lock_guard lock(t->mu);
        t->result = st;
        t->done = true;
        t->cv.notify_all();
      });
      in_flight_.push_back(std::move(t));
    }
    if (in_flight_.empty())
      return end_error_;
    auto t = std::move(in_flight_.front());
    in_flight_.pop_front();
    std::unique_lock lock(t->mu);
    t->cv.wait(lock, [&] { return t->done; });
    if (!t->result.ok())
      return t->result;
    std::move(t->items.begin(), t->items.end(), std::back_inserter(out));
    return {};
  }

private:
  struct task {
    std::vector<element> items;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    status result;
  };
  stream_ptr in_;
  std::shared_ptr<map_fn> fn_;
  std::vector<caf::actor> workers_;
  std::deque<std::shared_ptr<task>> in_flight_;
  size_t next_worker_ = 0;
  bool ended_ = false;
  status end_error_;
};

class map_node : public unary_node {
public:
  map_node(std::shared_ptr<const dataset_node> in, map_fn fn, int p)
      : unary_node(std::move(in)), fn_(std::move(fn)), parallelism_(p) {}
  result<stream_ptr> open(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    if (parallelism_ <= 1)
      return stream_ptr(std::make_unique<map_stream>(std::move(up), fn_));
    return stream_ptr(
        std::make_unique<parallel_map_stream>(*ctx.sys, std::move(up), fn_, parallelism_));
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
  filter_node(std::shared_ptr<const dataset_node> in, predicate_fn f)
      : unary_node(std::move(in)), keep_(std::move(f)) {}
  result<stream_ptr> open(open_context& ctx) const override {
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
  shuffle_node(std::shared_ptr<const dataset_node> in, size_t buffer, uint64_t seed, bool reshuffle)
      : unary_node(std::move(in)), buffer_(buffer),
        seed_(seed ? seed : std::random_device{}()), reshuffle_(reshuffle) {}
  result<stream_ptr> open(open_context& ctx) const override {
    uint64_t seed = next_seed();
    // Straight after records(): shuffle places in the files rather than payloads.
    if (auto* records = dynamic_cast<const records_node*>(input_.get());
        records && !records->options().reader.skip_corrupt) {
      RUNNEL_ASSIGN_OR_RETURN(auto files, records->expand());
      return stream_ptr(std::make_unique<records_shuffle_stream>(std::move(files),
                                                                 records->options(), buffer_, seed));
    }
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<shuffle_stream>(std::move(up), buffer_, seed));
  }
  const dataset_node* input() const { return input_.get(); }
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
  batch_node(std::shared_ptr<const dataset_node> in, int64_t n, bool drop, bool pad,
             std::vector<shape> shapes)
      : unary_node(std::move(in)), n_(n), drop_(drop), pad_(pad), shapes_(std::move(shapes)) {}
  result<stream_ptr> open(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<batch_stream>(std::move(up), n_, drop_, pad_, shapes_));
  }
  const dataset_node* input() const { return input_.get(); }
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
        auto dims = t.shape().dims();
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
  bucket_node(std::shared_ptr<const dataset_node> in, length_fn len, std::vector<int64_t> bounds,
              std::vector<int64_t> sizes, bool to_boundary)
      : unary_node(std::move(in)), len_(std::move(len)), bounds_(std::move(bounds)),
        sizes_(std::move(sizes)), to_boundary_(to_boundary) {}
  result<stream_ptr> open(open_context& ctx) const override {
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
  parse_node(std::shared_ptr<const dataset_node> in, std::vector<feature_spec> specs, int p)
      : unary_node(std::move(in)),
        parser_(std::make_shared<example_parser>(example_parser::create(specs).value())),
        fallback_(parse_examples(std::move(specs))), parallelism_(p) {}
  result<stream_ptr> open(open_context& ctx) const override {
    auto* b = dynamic_cast<const batch_node*>(input_.get());
    if (b && !b->padded()) {
      const dataset_node* below = b->input();
      auto* sh = dynamic_cast<const shuffle_node*>(below);
      auto* rec = dynamic_cast<const records_node*>(sh ? sh->input() : below);
      if (rec && !rec->options().reader.skip_corrupt) {
        RUNNEL_ASSIGN_OR_RETURN(auto files, rec->expand());
        record_places places(std::move(files), rec->options(), sh ? sh->buffer() : 0,
                             sh ? sh->next_seed() : 0);
        return stream_ptr(std::make_unique<records_parse_stream>(
            *ctx.sys, std::move(places), b->size(), b->drop_remainder(), parser_, parallelism_));
      }
    }
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    if (parallelism_ <= 1)
      return stream_ptr(std::make_unique<map_stream>(std::move(up), fallback_));
    return stream_ptr(
        std::make_unique<parallel_map_stream>(*ctx.sys, std::move(up), fallback_, parallelism_));
  }

private:
  std::shared_ptr<const example_parser> parser_;
  map_fn fallback_;
  int parallelism_;
};

// ---- repeat, take, skip ----

class repeat_stream : public element_stream {
public:
  repeat_stream(open_context ctx, std::shared_ptr<const dataset_node> node, int64_t epochs)
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
  std::shared_ptr<const dataset_node> node_;
  int64_t epochs_;
  int64_t epoch_ = 0;
  bool produced_this_epoch_ = false;
  stream_ptr in_;
};

class repeat_node : public unary_node {
public:
  repeat_node(std::shared_ptr<const dataset_node> in, int64_t e) : unary_node(std::move(in)), epochs_(e) {}
  result<stream_ptr> open(open_context& ctx) const override {
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
  take_skip_node(std::shared_ptr<const dataset_node> in, int64_t take, int64_t skip)
      : unary_node(std::move(in)), take_(take), skip_(skip) {}
  result<stream_ptr> open(open_context& ctx) const override {
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
  shard_node(std::shared_ptr<const dataset_node> in, int64_t n, int64_t index)
      : unary_node(std::move(in)), n_(n), index_(index) {}
  result<stream_ptr> open(open_context& ctx) const override {
    RUNNEL_ASSIGN_OR_RETURN(auto up, open_input(ctx));
    return stream_ptr(std::make_unique<shard_stream>(std::move(up), n_, index_));
  }

private:
  int64_t n_, index_;
};

// ---- the iterator resource ----

class actor_iterator : public iterator_resource {
public:
  actor_iterator(caf::actor_system& sys, std::string name)
      : name_(std::move(name)), sys_(sys), worker_(spawn_worker(sys)),
        state_(std::make_shared<state>()) {}
  ~actor_iterator() override {
    run_on(worker_, [s = state_] { s->stream.reset(); });
    caf::anon_send_exit(worker_, caf::exit_reason::user_shutdown);
  }
  const std::string& name() const override { return name_; }

  void get_next(queue_resource::dequeue_done_fn done) override {
    run_on(worker_, [s = state_, name = name_, done = std::move(done)] {
      if (!s->returned.empty()) {
        auto e = std::move(s->returned.front());
        s->returned.pop_front();
        return done({}, std::move(e));
      }
      if (!s->stream)
        return done(failed_precondition("iterator '" + name +
                                        "' is not initialized: call initialize_iterator(runtime, "
                                        "\"" + name + "\", dataset) before running steps that "
                                        "read it"),
                    {});
      element e;
      auto more = s->stream->next(e);
      if (!more)
        return done(more.error().with_context("iterator '" + name + "'"), {});
      if (!*more)
        return done(out_of_range("end of sequence: iterator '" + name +
                                 "' has no more elements (initialize it again for another epoch)"),
                    {});
      done({}, std::move(e));
    });
  }

  void put_back(std::vector<tensor> element) override {
    run_on(worker_, [s = state_, e = std::move(element)]() mutable {
      s->returned.push_front(std::move(e));
    });
  }

  /// Replaces the dataset; requests sent before this one still read the old one.
  status initialize(const dataset& ds) {
    open_context ctx{&sys_};
    auto stream = ds.node()->open(ctx);
    if (!stream)
      return stream.error().with_context("iterator '" + name_ + "'");
    std::promise<void> installed;
    auto fut = installed.get_future();
    auto holder = std::make_shared<stream_ptr>(std::move(stream).value());
    run_on(worker_, [s = state_, holder, &installed] {
      s->stream = std::move(*holder);
      s->returned.clear();
      installed.set_value();
    });
    fut.wait();
    return {};
  }

private:
  struct state {
    stream_ptr stream; // touched only by the worker
    std::deque<element> returned; // given back by aborted steps, served first
  };
  std::string name_;
  caf::actor_system& sys_;
  caf::actor worker_;
  std::shared_ptr<state> state_;
};

} // namespace

std::shared_ptr<iterator_resource> make_actor_iterator(caf::actor_system& sys, std::string name) {
  return std::make_shared<actor_iterator>(sys, std::move(name));
}

status initialize_iterator(runtime& rt, const std::string& name, const dataset& ds) {
  auto& devices = rt.internals().devices;
  // Iterators live with the first device's resources; the others forward to it.
  auto it = devices.front().resources->find_or_create_iterator(name);
  if (!it)
    return it.error();
  return static_cast<actor_iterator&>(**it).initialize(ds);
}

// ---- dataset ----

dataset dataset::records(std::vector<std::string> files, records_options options) {
  return dataset(std::make_shared<records_node>(std::move(files), options));
}
dataset dataset::from_tensors(element components) {
  return dataset(std::make_shared<tensors_node>(std::vector<element>{std::move(components)}));
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
  return dataset(std::make_shared<tensors_node>(std::move(rows)));
}
dataset dataset::range(int64_t n) {
  return dataset(std::make_shared<range_node>(n));
}
dataset dataset::map(map_fn fn, int parallelism) const {
  return dataset(std::make_shared<map_node>(node_, std::move(fn), parallelism));
}
dataset dataset::parse_examples(std::vector<feature_spec> specs, int parallelism) const {
  return dataset(std::make_shared<parse_node>(node_, std::move(specs), parallelism));
}
dataset dataset::filter(predicate_fn keep) const {
  return dataset(std::make_shared<filter_node>(node_, std::move(keep)));
}
dataset dataset::shuffle(size_t buffer, uint64_t seed, bool reshuffle) const {
  return dataset(std::make_shared<shuffle_node>(node_, buffer, seed, reshuffle));
}
dataset dataset::batch(int64_t n, bool drop_remainder) const {
  if (n < 1)
    throw error(invalid_argument("batch size must be at least 1, got " + std::to_string(n)));
  return dataset(std::make_shared<batch_node>(node_, n, drop_remainder, false,
                                              std::vector<shape>{}));
}
dataset dataset::padded_batch(int64_t n, std::vector<shape> padded_shapes,
                              bool drop_remainder) const {
  if (n < 1)
    throw error(invalid_argument("batch size must be at least 1, got " + std::to_string(n)));
  return dataset(std::make_shared<batch_node>(node_, n, drop_remainder, true,
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
  return dataset(std::make_shared<bucket_node>(node_, std::move(length), std::move(boundaries),
                                               std::move(batch_sizes), pad_to_bucket_boundary));
}
dataset dataset::repeat(int64_t epochs) const {
  return dataset(std::make_shared<repeat_node>(node_, epochs));
}
dataset dataset::take(int64_t n) const {
  return dataset(std::make_shared<take_skip_node>(node_, std::max<int64_t>(0, n), 0));
}
dataset dataset::skip(int64_t n) const {
  return dataset(std::make_shared<take_skip_node>(node_, -1, std::max<int64_t>(0, n)));
}
dataset dataset::shard(int64_t n, int64_t index) const {
  if (n < 1 || index < 0 || index >= n)
    throw error(invalid_argument("shard: index " + std::to_string(index) + " is not in [0, " +
                                 std::to_string(n) + ")"));
  return dataset(std::make_shared<shard_node>(node_, n, index));
}
dataset dataset::prefetch(int64_t n) const {
  return dataset(std::make_shared<prefetch_node>(node_, std::max<int64_t>(1, n)));
}

result<std::unique_ptr<element_stream>> dataset::open(runtime* rt) const {
  open_context ctx{rt ? rt->internals().system.get() : &private_system()};
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
