#include "runnel/actors/data/record_places.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "runnel/actors/data/record_arena.hpp"
#include "runnel/ops/core/stream_copy.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel {

/// The records of the shards, interleaved like records() and copied into an arena: read on
/// the thread that asks for them, or ahead of it on workers of their own, each reading the
/// shards of some slots of the interleave. Shared by the places and those workers, which stop
/// once cancelled.
class record_source {
public:
  record_source(std::vector<std::string> files, records_options o)
      : files_(std::move(files)), options_(o) {
    size_t cycle = options_.cycle_length > 0 ? size_t(options_.cycle_length)
                                             : std::min<size_t>(files_.size(), 8);
    slots_.resize(std::max<size_t>(1, std::min(cycle, files_.size())));
  }
  size_t slots() const { return slots_.size(); }

  /// From now on the slots' shards are read on `workers`, slot i on worker i % workers.size(),
  /// `batch` records at a time, up to `high` ahead of the asker.
  static void start(const std::shared_ptr<record_source>& self,
                    std::span<const std::unique_ptr<stage_worker>> workers) {
    for (size_t g = 0; g < workers.size(); ++g)
      self->groups_.push_back(std::make_unique<reader_group>());
    for (size_t i = 0; i < self->slots_.size(); ++i) {
      auto& s = self->slots_[i];
      s.ahead = std::make_unique<ahead_state>();
      s.group = self->groups_[i % workers.size()].get();
      s.group->slots.push_back(&s);
    }
    for (size_t g = 0; g < workers.size(); ++g)
      workers[g]->post([self, grp = self->groups_[g].get()] { self->run(*grp); });
  }
  void cancel() {
    for (auto& g : groups_) {
      std::lock_guard lock(g->mu);
      g->cancelled = true;
      g->cv.notify_all();
    }
  }

  /// The next record of the interleaved shards: true, false at the end, or the error met.
  result<bool> next(record_place& p) {
    for (;;) {
      bool any = false;
      for (auto& s : slots_) {
        if (!s.open && next_file_ < files_.size())
          RUNNEL_RETURN_IF_ERROR(open(s, next_file_++));
        any |= s.open;
      }
      if (!any)
        return false;
      auto& s = slots_[current_];
      if (!s.open) {
        current_ = (current_ + 1) % slots_.size();
        continue;
      }
      RUNNEL_ASSIGN_OR_RETURN(bool more, s.ahead ? take(s, p) : read(s, p));
      if (!more) { // this file is done; the slot takes the next
        s.open = false;
        if (!s.ahead)
          s.reader.reset(); // (a worker's reader is the worker's)
        continue;
      }
      if (++s.taken >= size_t(std::max(1, options_.block_length))) {
        s.taken = 0;
        current_ = (current_ + 1) % slots_.size();
      }
      return true;
    }
  }

  void release(std::span<const record_place> places) {
    std::lock_guard lock(arena_mu_);
    for (auto& p : places)
      arena_.release(p.data, p.length);
  }

private:
  static constexpr size_t batch = 32, high = 512, low = 256;

  struct reader_group;
  /// What a slot's worker has read ahead of the asker, and the file it was told to read next
  /// (under its group's lock).
  struct ahead_state {
    std::deque<record_place> ready;
    status error;               // after the records in `ready`
    bool done = false;          // the file ended after the records in `ready`
    std::optional<size_t> file; // to open next
  };
  struct slot {
    std::unique_ptr<record_reader> reader; // on the asker's thread, or its group's worker's
    std::unique_ptr<ahead_state> ahead;    // when read ahead
    reader_group* group = nullptr;
    bool open = false; // reading a file, as the asker sees it
    size_t taken = 0;
  };
  /// The slots one worker reads, and the lock and signal it shares with the asker.
  struct reader_group {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<slot*> slots;
    bool cancelled = false, asker_waiting = false, reader_waiting = false;
  };

  /// Starts reading file `f` on slot `s`: here, or by telling its worker.
  status open(slot& s, size_t f) {
    s.open = true;
    s.taken = 0;
    if (!s.ahead) {
      auto r = record_reader::open(files_[f], options_.reader);
      if (!r)
        return r.error();
      s.reader = std::make_unique<record_reader>(std::move(r).value());
      return {};
    }
    std::lock_guard lock(s.group->mu);
    s.ahead->file = f;
    s.group->cv.notify_all();
    return {};
  }

  /// The next record of a slot's file, read on this thread: true, false at its end.
  result<bool> read(slot& s, record_place& p) {
    std::string_view rec;
    RUNNEL_ASSIGN_OR_RETURN(bool more, s.reader->next_view(rec));
    if (!more)
      return false;
    {
      std::lock_guard lock(arena_mu_);
      p = {arena_.allocate(rec.size()), rec.size()};
    }
    copy_streaming(p.data, rec.data(), rec.size());
    return true;
  }

  /// The next record of a slot's file from its worker: true, false at its end.
  result<bool> take(slot& s, record_place& p) {
    auto& g = *s.group;
    auto& a = *s.ahead;
    std::unique_lock lock(g.mu);
    if (a.ready.empty() && !a.done && a.error.ok()) {
      g.asker_waiting = true;
      g.cv.wait(lock, [&] { return !a.ready.empty() || a.done || !a.error.ok(); });
      g.asker_waiting = false;
    }
    if (a.ready.empty()) {
      if (!a.error.ok())
        return a.error;
      a.done = false; // the end of this file, seen: the worker waits for the next
      return false;
    }
    p = a.ready.front();
    a.ready.pop_front();
    if (g.reader_waiting && a.ready.size() <= low)
      g.cv.notify_all();
    return true;
  }

  /// Whether the worker has something to do for slot `s` (under the group's lock).
  static bool can_read(const slot& s) {
    auto& a = *s.ahead;
    return a.file || (s.reader && a.error.ok() && !a.done && a.ready.size() < high);
  }

  /// A group's worker: reads a batch of whichever of its slots has the fewest records waiting,
  /// each file it is given to its end, until the cancel; sleeps while none can read (full, or
  /// done and not yet given its next file), until one is down to `low`.
  void run(reader_group& g) {
    std::vector<record_place> got;
    for (;;) {
      slot* s = nullptr;
      std::optional<size_t> file;
      {
        std::unique_lock lock(g.mu);
        auto pick = [&] {
          s = nullptr;
          for (auto* c : g.slots)
            if (can_read(*c) && (!s || c->ahead->ready.size() < s->ahead->ready.size()))
              s = c;
          return s != nullptr;
        };
        if (!pick()) {
          g.reader_waiting = true;
          g.cv.wait(lock, [&] { return g.cancelled || pick(); });
          g.reader_waiting = false;
        }
        if (g.cancelled)
          return;
        file.swap(s->ahead->file);
      }
      status error;
      bool end = false;
      if (file) {
        if (auto r = record_reader::open(files_[*file], options_.reader); r)
          s->reader = std::make_unique<record_reader>(std::move(r).value());
        else
          error = r.error();
      }
      got.clear();
      while (error.ok() && got.size() < batch) {
        record_place p;
        auto more = read(*s, p);
        if (!more || !*more) {
          error = more ? status() : more.error();
          end = bool(more);
          break;
        }
        got.push_back(p);
      }
      if (end || !error.ok())
        s->reader.reset();
      streaming_fence(); // the records' bytes are in memory before they are handed over
      std::lock_guard lock(g.mu);
      if (g.cancelled)
        return;
      auto& a = *s->ahead;
      a.ready.insert(a.ready.end(), got.begin(), got.end());
      a.error = error;
      a.done = end;
      if (g.asker_waiting)
        g.cv.notify_all();
    }
  }

  std::vector<std::string> files_;
  records_options options_;
  std::vector<slot> slots_;
  size_t current_ = 0, next_file_ = 0; // the asker's
  std::vector<std::unique_ptr<reader_group>> groups_;

  std::mutex arena_mu_; // allocations on the reading threads, releases on the asker's
  record_arena arena_;
};

record_places::record_places(std::vector<std::string> files, records_options o, size_t buffer,
                             uint64_t seed)
    : capacity_(std::max<size_t>(1, buffer)), shuffle_(buffer > 0), rng_(seed),
      source_(std::make_shared<record_source>(std::move(files), o)) {}

record_places::record_places(record_places&&) noexcept = default;
record_places& record_places::operator=(record_places&&) noexcept = default;

record_places::~record_places() {
  if (!workers_.empty()) {
    source_->cancel();
    workers_.clear();
  }
}

void record_places::read_ahead_on(const open_context& ctx, size_t max_workers) {
  size_t n = std::max<size_t>(1, std::min(max_workers, source_->slots()));
  for (size_t i = 0; i < n; ++i)
    workers_.push_back(ctx.start_worker());
  record_source::start(source_, workers_);
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
