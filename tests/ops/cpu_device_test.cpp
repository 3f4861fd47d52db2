#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runnel/ops/core/spin_wait.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"

using namespace runnel;

TEST_CASE("parallel_for runs every index once, in chunks of at least the grain", "[ops]") {
  cpu_device cpu(2);
  for (int64_t n : {1, 7, 64, 1000, 4099})
    for (int64_t grain : {1, 16, 5000}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int64_t> smallest{n};
      cpu.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          seen[size_t(i)].fetch_add(1);
        if (e < n) // only the last chunk may be short
          for (int64_t s = smallest.load(); e - b < s && !smallest.compare_exchange_weak(s, e - b);)
            ;
      });
      for (int64_t i = 0; i < n; ++i)
        REQUIRE(seen[size_t(i)].load() == 1);
      CHECK(smallest.load() >= std::min(grain, n));
    }
}

TEST_CASE("parallel_for does not wait for a helper busy elsewhere", "[ops]") {
  // The device's one helper is held inside another loop's chunk: a second loop must still
  // finish on its caller's thread alone, and return before that chunk is let go.
  cpu_device cpu(1);
  std::mutex mu;
  std::condition_variable cv;
  bool helper_in = false, release = false;
  auto caller = std::this_thread::get_id();
  std::thread other([&] {
    auto first = std::this_thread::get_id();
    cpu.parallel_for(2, 1, [&](int64_t, int64_t) {
      std::unique_lock lock(mu);
      if (std::this_thread::get_id() == first) { // keep the chunk until the helper has the other
        cv.wait(lock, [&] { return helper_in; });
        return;
      }
      helper_in = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    });
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return helper_in; });
  }
  std::vector<int> seen(64, 0);
  bool elsewhere = false;
  cpu.parallel_for(64, 1, [&](int64_t b, int64_t e) {
    elsewhere = elsewhere || std::this_thread::get_id() != caller;
    for (int64_t i = b; i < e; ++i)
      ++seen[size_t(i)];
  });
  CHECK_FALSE(elsewhere);
  CHECK(seen == std::vector<int>(64, 1));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  other.join();
}

TEST_CASE("an exception in a parallel_for chunk reaches its caller once every chunk is done",
          "[ops]") {
  cpu_device cpu(1);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int64_t> ran{0};
    CHECK_THROWS_WITH(cpu.parallel_for(64, 1,
                                       [&](int64_t b, int64_t e) {
                                         if (b <= 40 && 40 < e)
                                           throw std::runtime_error("chunk at 40");
                                         ran.fetch_add(e - b);
                                       }),
                      "chunk at 40");
    CHECK(ran.load() == 64 - 8); // the other seven chunks of 8 all ran before it returned
  }
  std::atomic<int64_t> sum{0};
  cpu.parallel_for(100, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  CHECK(sum.load() == 100);
}

TEST_CASE("spin_for returns what its poll found, or nothing once its budget is spent", "[ops]") {
  using namespace std::chrono_literals;
  std::atomic<int> value{0};
  std::thread setter([&] { value.store(42); });
  // Waits on the event: a budget of an hour ends only when the other thread's store is seen.
  int got = spin_for([&](size_t) { return value.load(); }, 3600s, 1us);
  setter.join();
  CHECK(got == 42);
  size_t polls = 0;
  auto start = std::chrono::steady_clock::now();
  int none = spin_for([&](size_t i) { return polls = i + 1, 0; }, 200us);
  CHECK(none == 0);
  CHECK(polls >= 16); // the clock is read every 16 polls
  CHECK(std::chrono::steady_clock::now() - start >= 200us);
}

TEST_CASE("parallel_sgemm matches a plain product for every transpose, split and beta", "[ops]") {
  INFO("float32 products through " << sgemm_library());
  // As a runtime does: blocks on the pool, one library thread per call.
  int blas_before = set_blas_threads(1);
  cpu_device cpu(2);
  struct dims {
    int64_t m, n, k;
  };
  // Small (one call), split by rows, split by columns, and k = 0 (C scaled by beta only).
  for (dims d : {dims{3, 5, 4}, dims{300, 40, 200}, dims{20, 300, 200}, dims{4, 6, 0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.f, 0.5f}) {
          int64_t lda = (ta ? d.m : d.k) + 3, ldb = (tb ? d.k : d.n) + 2, ldc = d.n + 1;
          std::vector<float> a(size_t((ta ? d.k : d.m) * lda)), b(size_t((tb ? d.n : d.k) * ldb));
          std::vector<float> c(size_t(d.m * ldc)), want;
          for (size_t i = 0; i < a.size(); ++i)
            a[i] = float(int(i * 7 % 13) - 6) / 8;
          for (size_t i = 0; i < b.size(); ++i)
            b[i] = float(int(i * 5 % 11) - 5) / 4;
          for (size_t i = 0; i < c.size(); ++i)
            c[i] = float(i % 9);
          want = c;
          for (int64_t i = 0; i < d.m; ++i)
            for (int64_t j = 0; j < d.n; ++j) {
              double sum = 0;
              for (int64_t p = 0; p < d.k; ++p)
                sum += double(ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]) *
                       double(tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]);
              auto& w = want[size_t(i * ldc + j)];
              w = float(2 * sum + beta * double(w));
            }
          parallel_sgemm(&cpu, ta, tb, d.m, d.n, d.k, 2.f, a.data(), lda, b.data(), ldb, beta,
                         c.data(), ldc);
          INFO("m " << d.m << " n " << d.n << " k " << d.k << " ta " << ta << " tb " << tb
                    << " beta " << beta);
          for (size_t i = 0; i < c.size(); ++i)
            REQUIRE(c[i] == Approx(want[i]).margin(1e-3));
        }
  set_blas_threads(blas_before);
}
