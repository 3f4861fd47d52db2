#pragma once
// A bounded spin for something another thread is about to do: the runtime's idle workers
// polling for a job, a caller waiting for a short step or a parallel loop's last chunk, the
// CPU device's helpers polling for the next loop.
//
//   auto job = spin_for([&](size_t i) { return queue.take(); }, 50us, 5us);
//   if (!job) sleep_until_woken();

#include <sched.h>

#include <chrono>
#include <cstddef>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace runnel {

/// Calls `poll(i)` for i = 0, 1, ... until it returns something true, which it returns, or
/// until `budget` has passed, when it returns a default-constructed (false) value. The clock is
/// read every 16 polls. Past `yield_after` the spinning thread also yields its core at each look
/// at the clock: where every core is taken, the thread it waits for then runs at once instead
/// of after this one's slice, and where a core is free the yield returns at once. A
/// `yield_after` of at least `budget` never yields.
template <class Poll>
auto spin_for(Poll&& poll, std::chrono::nanoseconds budget, std::chrono::nanoseconds yield_after)
    -> decltype(poll(size_t{})) {
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0;; ++i) {
    if (auto got = poll(i))
      return got;
#if defined(__x86_64__)
    _mm_pause();
#endif
    if (i % 16 == 15) {
      auto waited = std::chrono::steady_clock::now() - start;
      if (waited > budget)
        return {};
      if (waited > yield_after)
        ::sched_yield();
    }
  }
}

/// spin_for that never yields its core.
template <class Poll>
auto spin_for(Poll&& poll, std::chrono::nanoseconds budget) -> decltype(poll(size_t{})) {
  return spin_for(static_cast<Poll&&>(poll), budget, budget);
}

} // namespace runnel
