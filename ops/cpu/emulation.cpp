// EmulatedCompute's kernel: fills its outputs with one value (cheap: one pass over their bytes),
// then holds its device until `seconds` after it started. The wait is a timer, not a sleeping
// pool thread: the node completes asynchronously, so the device's threads stay free for the
// transfers and updates that the emulated compute is meant to overlap.
//
// "Holds its device": nodes of one device run their emulated time one after another, as kernels
// on a real accelerator's stream would; a node that becomes ready while another holds the device
// starts when that one ends.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

using clock_type = std::chrono::steady_clock;

/// One thread that runs callbacks at their deadlines, and the time each device is busy until.
/// Process-wide and never destroyed: a callback may still be pending when the process exits.
class delay_line {
public:
  static delay_line& instance() {
    static delay_line* line = new delay_line;
    return *line;
  }

  /// Reserves `seconds` of `device` from now or from when its earlier reservations end, and
  /// returns when the reservation ends.
  clock_type::time_point reserve(const void* device, clock_type::time_point now, double seconds) {
    std::lock_guard lock(mutex_);
    auto& busy = busy_until_[device];
    auto start = std::max(now, busy);
    busy = start +
           std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
    return busy;
  }

  /// Runs `fn` on the delay line's thread at `when`.
  void at(clock_type::time_point when, std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      pending_.push({when, sequence_++, std::move(fn)});
    }
    wake_.notify_one();
  }

private:
  struct entry {
    clock_type::time_point when;
    uint64_t sequence; // equal deadlines run in the order they were scheduled
    std::function<void()> fn;
    bool operator>(const entry& o) const {
      return when != o.when ? when > o.when : sequence > o.sequence;
    }
  };

  delay_line() : thread_([this] { loop(); }) { thread_.detach(); }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (pending_.empty()) {
        wake_.wait(lock);
        continue;
      }
      auto when = pending_.top().when;
      if (clock_type::now() < when) {
        wake_.wait_until(lock, when);
        continue;
      }
      auto fn = std::move(const_cast<entry&>(pending_.top()).fn);
      pending_.pop();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<entry, std::vector<entry>, std::greater<>> pending_;
  std::map<const void*, clock_type::time_point> busy_until_;
  uint64_t sequence_ = 0;
  std::thread thread_;
};

class emulated_compute_kernel : public kernel {
public:
  explicit emulated_compute_kernel(const kernel_construction& c)
      : seconds_(c.attr<double>("seconds")), scale_(float(c.attr<double>("scale"))),
        shapes_(c.attr<std::vector<shape>>("output_shapes")) {}

  bool is_async() const override { return true; }
  status compute(kernel_context&) override {
    return internal_error("EmulatedCompute is asynchronous");
  }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto now = clock_type::now();
    float sum = 0;
    for (const tensor& x : ctx.inputs()) {
      if (x.type() != dtype::f32)
        return done(invalid_argument("EmulatedCompute takes float32 inputs, got " + x.to_string()));
      if (x.num_elements() > 0)
        sum += x.data<float>()[0];
    }
    float value = scale_ * sum;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      tensor& out = ctx.allocate_output(int(i), dtype::f32, shapes_[i]);
      std::fill_n(out.data<float>(), out.num_elements(), value);
    }
    const void* device = ctx.has_cpu() ? static_cast<const void*>(&ctx.cpu()) : nullptr;
    auto& line = delay_line::instance();
    auto until = line.reserve(device, now, seconds_);
    if (until <= clock_type::now())
      return done({});
    line.at(until, [done = std::move(done)] { done({}); });
  }

private:
  double seconds_;
  float scale_;
  std::vector<shape> shapes_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(emulation) {
  reg.add("EmulatedCompute", device_type::cpu, {}, make_kernel<emulated_compute_kernel>);
}

} // namespace runnel
