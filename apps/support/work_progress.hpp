#pragma once
// A progress line for long work through bytes and records (`runnel records stats|cat|convert`):
//
//   work_progress p("records stats", total_bytes);   // 0: total unknown
//   for (...) p.add(record_bytes);                     // cheap: looks at the clock now and then
//   p.finish();                                        // (or the destructor)
//
// On a terminal, once the work has taken a second, stderr shows
// `records stats: 1.21 GB of 3.40 GB (36%)  412000 records  812 MB/s  280000 records/s`,
// rewritten at most every 200 ms; finish() ends it with the totals. When stderr is not a
// terminal, RUNNEL_PROGRESS_EVERY=S writes a whole line every S seconds (as the training apps'
// progress lines do); otherwise nothing is written.
#include <chrono>
#include <cstdint>
#include <string>

namespace runnel::apps {

class work_progress {
public:
  explicit work_progress(std::string what, uint64_t total_bytes = 0);
  work_progress(const work_progress&) = delete;
  work_progress& operator=(const work_progress&) = delete;
  ~work_progress() { finish(); }

  void add(uint64_t bytes, int64_t records = 1) {
    bytes_ += bytes;
    records_ += records;
    if ((++calls_ & 255) == 0)
      maybe_draw();
  }
  /// Ends the line (with the totals) if one was drawn.
  void finish();

private:
  void maybe_draw();
  void draw(const char* prefix);
  std::string what_;
  uint64_t total_ = 0, bytes_ = 0;
  int64_t records_ = 0;
  uint64_t calls_ = 0;
  bool terminal_ = false, drawn_ = false;
  double every_s_ = 0; ///< when not a terminal: RUNNEL_PROGRESS_EVERY
  std::chrono::steady_clock::time_point start_, last_;
};

} // namespace runnel::apps
