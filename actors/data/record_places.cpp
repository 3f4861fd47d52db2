#include "runnel/actors/data/record_places.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "runnel/actors/data/record_arena.hpp"
#include "runnel/ops/core/stream_copy.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel {

/// The records of the shards, interleaved like records() and copied into an arena: read on
/// the thread that asks for them, or ahead of it on a worker of their own. Shared by the
/// places and that worker, which stops once cancelled.
class record_source {
public:
  record_source(std::vector<std::string> files, records_options o)
      : files_(std::move(files)), options_(o) {
    size_t cycle = options_.cycle_length > 0 ? size_t(options_.cycle_length)
                                             : std::min<size_t>(files_.size(), 8);
    slots_.resize(std::max<size_t>(1, std::min(cycle, files_.size())));
  }

  /// From now on the records are read on `worker`, `batch` at a time, up to `high` ahead.
  static void start(const std::shared_ptr<record_source>& self, stage_worker& worker) {
    self->background_ = true;
    worker.post([self] { self->run(); });
  }
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

  /// The next record: true, false at the end, or the error met reading it.
  result<bool> next(record_place& p) {
    if (!background_)
      return read_one(p);
    std::unique_lock lock(mu_);
    if (ready_.empty() && !end_ && error_.ok()) {
      consumer_waiting_ = true;
      cv_.wait(lock, [&] { return !ready_.empty() || end_ || !error_.ok(); });
      consumer_waiting_ = false;
    }
    if (ready_.empty())
      return error_.ok() ? result<bool>(false) : result<bool>(error_);
    p = ready_.front();
    ready_.pop_front();
    if (reader_waiting_ && ready_.size() <= low)
      cv_.notify_all();
    return true;
  }

  void release(std::span<const record_place> places) {
    std::lock_guard lock(arena_mu_);
    for (auto& p : places)
      arena_.release(p.data, p.length);
  }

private:
  static constexpr size_t batch = 32, high = 512, low = 256;

  /// The worker's loop: reads until the end, an error, or the cancel; sleeps while `high`
  /// records wait, until they are down to `low` (one wake-up for every 256 records at most).
  void run() {
    std::vector<record_place> got;
    for (;;) {
      got.clear();
      status error;
      bool end = false;
      while (got.size() < batch) {
        record_place p;
        auto more = read_one(p);
        if (!more || !*more) {
          error = more ? status() : more.error();
          end = bool(more);
          break;
        }
        got.push_back(p);
      }
      streaming_fence(); // the records' bytes are in memory before they are handed over
      std::unique_lock lock(mu_);
      if (cancelled_)
        return;
      ready_.insert(ready_.end(), got.begin(), got.end());
      error_ = error;
      end_ = end;
      if (consumer_waiting_)
        cv_.notify_all();
      if (!error.ok() || end)
        return;
      if (ready_.size() >= high) {
        reader_waiting_ = true;
        cv_.wait(lock, [&] { return cancelled_ || ready_.size() <= low; });
        reader_waiting_ = false;
        if (cancelled_)
          return;
      }
    }
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
      {
        std::lock_guard lock(arena_mu_);
        p = {arena_.allocate(rec.size()), rec.size()};
      }
      copy_streaming(p.data, rec.data(), rec.size());
      if (++s.taken >= size_t(std::max(1, options_.block_length))) {
        s.taken = 0;
        current_ = (current_ + 1) % slots_.size();
      }
      return true;
    }
  }

  struct slot {
    std::unique_ptr<record_reader> reader;
    size_t taken = 0;
  };
  // Read by one thread at a time: the asker's, or the worker's once started.
  std::vector<std::string> files_;
  records_options options_;
  std::vector<slot> slots_;
  size_t current_ = 0, next_file_ = 0;
  bool background_ = false;

  std::mutex arena_mu_; // allocations on the reading thread, releases on the asker's
  record_arena arena_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<record_place> ready_;
  status error_;
  bool end_ = false, cancelled_ = false, consumer_waiting_ = false, reader_waiting_ = false;
};

record_places::record_places(std::vector<std::string> files, records_options o, size_t buffer,
                             uint64_t seed)
    : capacity_(std::max<size_t>(1, buffer)), shuffle_(buffer > 0), rng_(seed),
      source_(std::make_shared<record_source>(std::move(files), o)) {}

record_places::record_places(record_places&&) noexcept = default;
record_places& record_places::operator=(record_places&&) noexcept = default;

record_places::~record_places() {
  if (worker_) {
    source_->cancel();
    worker_.reset();
  }
}

void record_places::read_ahead_on(std::unique_ptr<stage_worker> worker) {
  worker_ = std::move(worker);
  record_source::start(source_, *worker_);
}

status record_places::next(std::vector<record_place>& out, size_t n) {
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

void record_places::release(std::span<const record_place> places) {
  source_->release(places);
}

/// Takes a random place out of the full window. The window's places are long out of cache by
/// the time one is drawn (the records stream through it), so the next draw is made now, when
/// the next window's size is already known (a record read ahead will fill it again), and its
/// place fetched while the next record is read: the same draws, in the same order, as drawing
/// each when it is needed.
record_place record_places::pick() {
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
status record_places::fill() {
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

/// Takes one more record into `ahead_`, unless the end or an error was met.
void record_places::read_ahead() {
  if (ahead_end_ || !ahead_error_.ok())
    return;
  record_place p;
  auto more = source_->next(p);
  if (!more)
    ahead_error_ = more.error();
  else if (!*more)
    ahead_end_ = true;
  else
    ahead_.push_back(p);
}

} // namespace runnel
