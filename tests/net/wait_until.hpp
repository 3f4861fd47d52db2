#pragma once
// Waits for a condition another thread makes true (a counter a network loop bumps after the
// connection it counts is gone): polls it until it holds, failing the test after 20 s.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

namespace runnel::testing {

template <class F> void wait_until(F done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace runnel::testing
