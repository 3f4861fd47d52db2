#include "runnel/apps/support/work_progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace runnel::apps {
namespace {

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0f kB", b / 1e3);
  return buf;
}

} // namespace

work_progress::work_progress(std::string what, uint64_t total_bytes)
    : what_(std::move(what)), total_(total_bytes), terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_(start_) {
  if (const char* every = std::getenv("RUNNEL_PROGRESS_EVERY"))
    every_s_ = std::max(0.0, std::atof(every));
}

void work_progress::maybe_draw() {
  auto now = std::chrono::steady_clock::now();
  double since_last = std::chrono::duration<double>(now - last_).count();
  if (terminal_) {
    if (now - start_ < std::chrono::seconds(1) || since_last < 0.2)
      return;
    last_ = now;
    draw("\r");
  } else if (every_s_ > 0 && since_last >= every_s_) {
    last_ = now;
    draw("");
    std::fputc('\n', stderr);
  }
}

void work_progress::draw(const char* prefix) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string done = human_bytes(double(bytes_));
  if (total_ > 0)
    done += " of " + human_bytes(double(total_)) + " (" +
            std::to_string(std::min<uint64_t>(100, bytes_ * 100 / total_)) + "%)";
  std::fprintf(stderr, "%s%s: %s  %lld records  %s/s  %.0f records/s   ", prefix, what_.c_str(),
               done.c_str(), static_cast<long long>(records_),
               human_bytes(secs > 0 ? double(bytes_) / secs : 0).c_str(),
               secs > 0 ? double(records_) / secs : 0.0);
  std::fflush(stderr);
  drawn_ = true;
}

void work_progress::finish() {
  if (!drawn_)
    return;
  if (terminal_) {
    draw("\r");
    std::fputc('\n', stderr);
  } else {
    draw("");
    std::fputc('\n', stderr);
  }
  drawn_ = false;
}

} // namespace runnel::apps
