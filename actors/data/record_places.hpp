#pragma once
// The records of a fused records()[.shuffle(n)] stream, read, checked and waiting in a window
// to be handed out (actors/data/, private).
//
//   record_places places(files, options, 10'000, seed); // 0: in order, no shuffle
//   places.read_ahead_on(ctx, 2);                       // optional: read on 2 workers of its own
//   std::vector<record_place> batch;
//   RUNNEL_RETURN_IF_ERROR(places.next(batch, 100));    // fewer only at the end
//   ... read batch[i].view() on any thread ...
//   places.release(batch);                              // on the thread that calls next()
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/data/stages.hpp"

namespace runnel {

/// A record read and checked, waiting in a shuffle window: its bytes in the window's arena.
struct record_place {
  char* data = nullptr;
  size_t length = 0;
  std::string_view view() const { return {data, length}; }
};

class record_source; // the shards read in order into an arena (record_places.cpp)

/// The records of `files`, interleaved like records(), optionally through a shuffle window of
/// `buffer` records (0: in order). Each record is read with its CRCs checked (pread into a
/// reused buffer, so the check runs over bytes still in cache: checked later, from the arena,
/// the same CRC cost four times as much) and copied once into the arena, where it stays until
/// the consumer gives its place back with release(). The copy streams past the caches: the
/// record is read again only after thousands of others, from memory either way, and an
/// ordinary copy would first read each line it overwrites and evict the window's bookkeeping.
class record_places {
public:
  record_places(std::vector<std::string> files, records_options o, size_t buffer, uint64_t seed);
  record_places(record_places&&) noexcept;
  record_places& operator=(record_places&&) noexcept;
  ~record_places();

  /// Reads (pread, CRCs, the copy into the arena) ahead of next() from now on, on up to
  /// `max_workers` workers of its own, each reading the shards of some slots of the
  /// interleave; next() then only merges them, in the same order, and draws.
  void read_ahead_on(const open_context& ctx, size_t max_workers);
  /// Appends up to `n` places; fewer only at the end.
  status next(std::vector<record_place>& out, size_t n);
  /// Frees the records of places next() handed out (on the thread that calls next()).
  void release(std::span<const record_place> places);

private:
  size_t draw(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  record_place pick();
  status fill();
  void read_ahead();

  size_t capacity_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::shared_ptr<record_source> source_; // shared with the worker reading ahead, if any
  std::vector<std::unique_ptr<stage_worker>> workers_;
  std::vector<record_place> buf_;
  size_t head_ = 0;                // in order: the next place to hand out
  std::deque<record_place> ahead_; // read, not yet in the window
  bool ahead_end_ = false;         // the files are done
  status ahead_error_;             // met reading ahead: returned where it occurred
  std::optional<size_t> drawn_;    // the next pick, drawn early
};

} // namespace runnel
