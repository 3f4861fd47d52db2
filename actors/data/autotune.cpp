// dataset::autotune's hill climb (autotune.hpp).
#include "runnel/actors/data/autotune.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "runnel/actors/data/dataset.hpp"

namespace runnel {

autotune_knob::autotune_knob(int64_t start, int64_t min, int64_t max, bool multiply)
    : value_(std::clamp(start, min, std::max(min, max))), min_(min), max_(std::max(min, max)),
      multiply_(multiply) {}

void autotune_knob::cap(int64_t max) {
  max_ = std::max(min_, std::min(max_, max));
  if (value() > max_)
    value_.store(max_, std::memory_order_relaxed);
}

int64_t autotune_knob::step_up(int64_t v) const {
  return std::min(max_, multiply_ ? std::max(v + 1, 2 * v) : v + 1);
}

bool autotune_knob::observe(int64_t elements, double seconds, int64_t takes, int64_t starved) {
  if (seconds <= 0 || takes <= 0)
    return false;
  double rate = double(elements) / seconds;
  int64_t v = value();
  if (probe_from_ >= 0) {
    // The first window after a step still holds the old setting's tail: it is not counted.
    if (++probe_windows_ == 1)
      return false;
    probe_sum_ += rate;
    if (probe_windows_ < 3)
      return false;
    double probe_rate = probe_sum_ / double(probe_windows_ - 1);
    bool keep = probe_rate >= 1.05 * base_rate_;
    if (keep) {
      backoff_ = 2;
    } else {
      value_.store(probe_from_, std::memory_order_relaxed);
      cooldown_ = backoff_;
      backoff_ = std::min(backoff_ * 2, 64);
    }
    last_rate_ = keep ? probe_rate : 0;
    probe_from_ = -1;
    probe_sum_ = 0;
    probe_windows_ = 0;
    return !keep;
  }
  double previous = last_rate_;
  last_rate_ = rate;
  if (cooldown_ > 0) {
    --cooldown_;
    return false;
  }
  if (v >= max_ || double(starved) < 0.1 * double(takes))
    return false;
  base_rate_ = previous > 0 ? (previous + rate) / 2 : rate;
  probe_from_ = v;
  value_.store(step_up(v), std::memory_order_relaxed);
  return true;
}

void autotune_window::take(bool starved, int64_t elements) {
  ++takes_;
  starved_ += starved ? 1 : 0;
  elements_ += elements;
}

bool autotune_window::maybe_observe(autotune_knob& knob) {
  if (takes_ < autotune_knob::min_takes)
    return false;
  auto now = clock::now();
  double seconds = std::chrono::duration<double>(now - start_).count();
  if (seconds < autotune_knob::min_seconds)
    return false;
  bool changed = knob.observe(elements_, seconds, takes_, starved_);
  start_ = now;
  takes_ = starved_ = elements_ = 0;
  return changed;
}

stage_workers::stage_workers(const open_context& ctx, int count) : ctx_(ctx) {
  if (count == dataset::autotune)
    knob_ = std::make_unique<autotune_knob>(1, 1, autotune_thread_budget(), false);
  start(knob_ ? knob_->value() : std::max(0, count));
}

void stage_workers::start(int64_t n) {
  while (int64_t(workers_.size()) < n)
    workers_.push_back(ctx_.start_worker());
}

void stage_workers::post(std::function<void()> task) {
  workers_[next_++ % active()]->post(std::move(task));
}

void stage_workers::took(bool starved, int64_t elements) {
  if (!knob_)
    return;
  window_.take(starved, elements);
  if (window_.maybe_observe(*knob_))
    start(knob_->value());
}

int64_t autotune_thread_budget() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string autotune_label(int64_t requested) {
  return requested == dataset::autotune ? "autotune" : std::to_string(requested);
}

} // namespace runnel
