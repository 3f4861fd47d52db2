// The synchronous data-parallel step model (placement/data_parallel.hpp) on cases worked by hand.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "runnel/placement/data_parallel.hpp"

using namespace runnel;

TEST_CASE("one worker with its shard on its host pays compute, messages and the fixed cost",
          "[placement]") {
  data_parallel_model m{.layers = {{.name = "a",
                                    .forward_s = 0.01,
                                    .backward_s = 0.02,
                                    .pieces = {{.bytes = 1e6, .shard = 0}}},
                                   {.name = "b",
                                    .forward_s = 0.02,
                                    .backward_s = 0.04,
                                    .pieces = {{.bytes = 2e6, .shard = 0}}}},
                        .workers = 1,
                        .shards = 1,
                        .link_bytes_per_s = 1e6, // no link is used: its rate must not matter
                        .message_s = 1e-4,
                        .aggregate_bytes_per_s = 1e9,
                        .step_overhead_s = 0.005};
  auto p = predict_sync_step(m);
  CHECK(p.compute_s == Approx(0.09));
  CHECK(p.wire_bytes == 0);
  // The first layer waits for its piece's message; layer a's gradient is the last in, after the
  // whole backward pass, plus its message and its update (2 x 1 MB at 1 GB/s).
  CHECK(p.step_s == Approx(0.09 + 2e-4 + 2e-3 + 0.005));
  CHECK(p.pull_wait_s == Approx(1e-4));
}

TEST_CASE("two workers with a shard each exchange half the model each way", "[placement]") {
  // One layer, two pieces of 1 MB, one on each shard; links of 10 MB/s.
  data_parallel_model m{
      .layers = {{.name = "l",
                  .forward_s = 0.1,
                  .backward_s = 0.2,
                  .pieces = {{.bytes = 1e6, .shard = 0}, {.bytes = 1e6, .shard = 1}}}},
      .workers = 2,
      .shards = 2,
      .link_bytes_per_s = 10e6,
      .payload_fraction = 1,
      .message_s = 0,
      .aggregate_bytes_per_s = 1e12};
  auto p = predict_sync_step(m);
  // The remote piece takes 0.1 s to arrive before the forward pass, and 0.1 s to leave after the
  // backward pass: nothing overlaps in a one-layer model.
  CHECK(p.step_s == Approx(0.1 + 0.3 + 0.1));
  CHECK(p.pull_wait_s == Approx(0.1));
  CHECK(p.push_tail_s == Approx(0.1));
  // Each host sends its worker's push (1 MB) and its shard's reply to the other worker (1 MB).
  CHECK(p.wire_bytes == Approx(2e6));
  CHECK(p.wire_bound_s == Approx(0.3));
}

TEST_CASE("a single ps host serving many workers is the bottleneck", "[placement]") {
  auto step = [](int workers) {
    data_parallel_model m{.layers = {{.name = "l",
                                      .forward_s = 0.01,
                                      .backward_s = 0.02,
                                      .pieces = {{.bytes = 1e6, .shard = 0}}}},
                          .workers = workers,
                          .shards = 1,
                          .colocated = false,
                          .link_bytes_per_s = 100e6,
                          .payload_fraction = 1,
                          .message_s = 0,
                          .aggregate_bytes_per_s = 1e15};
    return predict_sync_step(m);
  };
  // The ps's link carries the piece to every worker and every gradient back: N x 10 ms each way.
  CHECK(step(1).step_s == Approx(0.01 + 0.03 + 0.01));
  CHECK(step(4).step_s == Approx(0.04 + 0.03 + 0.04));
  CHECK(step(4).wire_bytes == Approx(4e6));
}

TEST_CASE("later layers' parameters arrive while earlier layers compute", "[placement]") {
  // Two layers, the second's piece remote and large: its transfer overlaps the first layer.
  data_parallel_model m{.layers = {{.name = "a",
                                    .forward_s = 0.05,
                                    .backward_s = 0.1,
                                    .pieces = {{.bytes = 1e5, .shard = 0}}},
                                   {.name = "b",
                                    .forward_s = 0.05,
                                    .backward_s = 0.1,
                                    .pieces = {{.bytes = 4e5, .shard = 1}}}},
                        .workers = 2,
                        .shards = 2,
                        .link_bytes_per_s = 10e6,
                        .payload_fraction = 1,
                        .message_s = 0,
                        .aggregate_bytes_per_s = 1e12};
  auto p = predict_sync_step(m);
  // Worker 0: b's piece (40 ms) arrives before a's forward (50 ms) ends: no wait. Its gradient
  // leaves first in the backward pass (at 200 ms, 40 ms) and is in long before the pass ends.
  // Worker 1 waits 10 ms for a's piece, and a's gradient is the last thing of its step.
  CHECK(p.pull_wait_s == Approx(0.01));
  CHECK(p.step_s == Approx(0.01 + 0.3 + 0.01));
}

TEST_CASE("the step model refuses a piece on a shard that does not exist", "[placement]") {
  data_parallel_model m{.layers = {{.name = "conv1", .pieces = {{.bytes = 1, .shard = 3}}}},
                        .workers = 2,
                        .shards = 2};
  CHECK_THROWS_WITH(predict_sync_step(m), Catch::Contains("conv1") && Catch::Contains("shard 3"));
}

TEST_CASE("on an emulating machine every host gets its share of what the machine moves",
          "[placement]") {
  auto model = [](double machine) {
    data_parallel_model m{.layers = {{.name = "l", .forward_s = 0.1, .backward_s = 0.2}},
                          .workers = 8,
                          .shards = 8,
                          .link_bytes_per_s = 10e6,
                          .payload_fraction = 1,
                          .machine_bytes_per_s = machine,
                          .message_s = 0,
                          .aggregate_bytes_per_s = 1e15};
    for (int k = 0; k < 8; ++k)
      m.layers[0].pieces.push_back({.bytes = 1e6, .shard = k});
    return predict_sync_step(m);
  };
  // Real hosts: 7 remote pieces each way at 10 MB/s.
  CHECK(model(0).link_payload_bytes_per_s == Approx(10e6));
  CHECK(model(0).step_s == Approx(0.7 + 0.3 + 0.7));
  // A machine that moves 40 MB/s between 8 hosts gives each 5 MB/s.
  CHECK(model(40e6).link_payload_bytes_per_s == Approx(5e6));
  CHECK(model(40e6).step_s == Approx(1.4 + 0.3 + 1.4));
  // One that moves more than the links leaves them as they are.
  CHECK(model(1e9).step_s == Approx(model(0).step_s));
}
