#include <atomic>
#include <set>
#include <thread>

#include "runnel/actors/data/batching.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// A unique queue name per test (queues live as long as the shared runtime).
std::string qname(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "_" + std::to_string(n++);
}

} // namespace

TEST_CASE("a FIFO queue keeps order through enqueue, enqueue_many and dequeue_many", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::f32, dtype::i64}, {.shapes = {{2}, {}}, .capacity = 10},
                      qname("fifo"));
  auto x = placeholder(g, dtype::f32, {-1, 2}, "x");
  auto y = placeholder(g, dtype::i64, {-1}, "y");
  auto enq_many = q.enqueue_many({x, y});
  auto one = q.dequeue();
  auto three = q.dequeue_many(3);
  CHECK(three[0].shape() == shape{3, 2});
  CHECK(one[0].shape() == shape{2});
  auto size = q.size();
  session s(test_runtime(), g);
  REQUIRE(s.run({{x, vals<float>({4, 2}, {0, 0, 1, 1, 2, 2, 3, 3})},
                 {y, tensor::vector<int64_t>({10, 11, 12, 13})}},
                {}, {enq_many})
              .ok());
  check_equal(s.run({}, {size}).value()[0], tensor::scalar<int32_t>(4));
  auto a = s.run({}, {one[0], one[1]}).value();
  check_equal(a[0], tensor::vector<float>({0, 0}));
  check_equal(a[1], tensor::scalar<int64_t>(10));
  auto b = s.run({}, {three[0], three[1]}).value();
  check_equal(b[0], vals<float>({3, 2}, {1, 1, 2, 2, 3, 3}));
  check_equal(b[1], tensor::vector<int64_t>({11, 12, 13}));
}

TEST_CASE("a dequeue waits for an enqueue from another session", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, qname("wait"));
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto enq = q.enqueue({v});
  auto deq = q.dequeue();
  session consumer(test_runtime(), g), producer(test_runtime(), g);
  auto pending = consumer.run_async({}, {deq[0]});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(pending.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  REQUIRE(producer.run({{v, tensor::scalar<int32_t>(42)}}, {}, {enq}).ok());
  auto r = pending.get();
  REQUIRE(r.ok());
  check_equal(r.value()[0], tensor::scalar<int32_t>(42));
}

TEST_CASE("an enqueue blocks while the queue is full", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .capacity = 2}, qname("full"));
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto enq = q.enqueue({v});
  auto deq = q.dequeue();
  session s(test_runtime(), g);
  for (int i = 0; i < 2; ++i)
    REQUIRE(s.run({{v, tensor::scalar<int32_t>(i)}}, {}, {enq}).ok());
  auto blocked = s.run_async({{v, tensor::scalar<int32_t>(2)}}, {}, {enq});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(blocked.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  check_equal(s.run({}, {deq[0]}).value()[0], tensor::scalar<int32_t>(0));
  REQUIRE(blocked.get().ok());
  check_equal(s.run({}, {deq[0]}).value()[0], tensor::scalar<int32_t>(1));
  check_equal(s.run({}, {deq[0]}).value()[0], tensor::scalar<int32_t>(2));
}

TEST_CASE("close: remaining elements drain, then dequeues get out_of_range", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, qname("close"));
  auto v = placeholder(g, dtype::i32, {-1}, "v");
  auto enq = q.enqueue_many({v});
  auto deq2 = q.dequeue_many(2);
  auto upto = q.dequeue_up_to(2);
  auto close = q.close();
  session s(test_runtime(), g);
  REQUIRE(s.run({{v, tensor::vector<int32_t>({1, 2, 3})}}, {}, {enq}).ok());
  // A dequeue_many waiting for more is failed by the close, and its element goes back.
  check_equal(s.run({}, {deq2[0]}).value()[0], tensor::vector<int32_t>({1, 2}));
  auto waiting = s.run_async({}, {deq2[0]});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(s.run({close}).ok());
  auto w = waiting.get();
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code() == error_code::out_of_range);
  CHECK_THAT(w.error().message(), Catch::Contains("is closed and has insufficient elements"));
  // dequeue_up_to returns the final, smaller batch (the element put back), then out_of_range.
  check_equal(s.run({}, {upto[0]}).value()[0], tensor::vector<int32_t>({3}));
  auto end = s.run({}, {upto[0]});
  REQUIRE_FALSE(end.ok());
  CHECK(end.error().code() == error_code::out_of_range);
  // Enqueues after close are cancelled.
  auto late = s.run({{v, tensor::vector<int32_t>({4})}}, {}, {enq});
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().code() == error_code::cancelled);
}

TEST_CASE("close with cancel_pending_enqueues fails blocked enqueues", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .capacity = 1}, qname("cancel"));
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto enq = q.enqueue({v});
  auto cancel = q.close(true);
  auto deq = q.dequeue();
  session s(test_runtime(), g);
  REQUIRE(s.run({{v, tensor::scalar<int32_t>(1)}}, {}, {enq}).ok());
  auto blocked = s.run_async({{v, tensor::scalar<int32_t>(2)}}, {}, {enq});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(s.run({cancel}).ok());
  auto r = blocked.get();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::cancelled);
  // The element enqueued before the close is still delivered.
  check_equal(s.run({}, {deq[0]}).value()[0], tensor::scalar<int32_t>(1));
}

TEST_CASE("a dequeue nobody feeds times out with a message about queue runners", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::f32}, {.shapes = {{}}, .timeout_ms = 100}, qname("timeout"));
  auto deq = q.dequeue();
  session s(test_runtime(), g);
  auto t0 = std::chrono::steady_clock::now();
  auto r = s.run({}, {deq[0]});
  auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK_THAT(r.error().message(), Catch::Contains("queue runners"));
  CHECK_THAT(r.error().message(), Catch::Contains("dequeue"));
  CHECK(waited >= std::chrono::milliseconds(100));
}

TEST_CASE("bad enqueues name the queue and component and change nothing", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::f32}, {.shapes = {{2}}}, qname("bad"));
  auto x = placeholder(g, dtype::f32, shape::unknown(), "x");
  auto enq = q.enqueue({x});
  auto size = q.size();
  session s(test_runtime(), g);
  auto r = s.run({{x, tensor::vector<float>({1, 2, 3})}}, {}, {enq});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::invalid_argument);
  CHECK_THAT(r.error().message(), Catch::Contains("element shape [3], expected [2]"));
  CHECK_THAT(r.error().message(), Catch::Contains(q.name()));
  check_equal(s.run({}, {size}).value()[0], tensor::scalar<int32_t>(0));
  // A component of the wrong dtype is caught when the graph is built.
  auto i = placeholder(g, dtype::i32, {2}, "i");
  CHECK_THROWS_WITH(q.enqueue({i}), Catch::Contains("must be float32"));
}

TEST_CASE("a random shuffle queue keeps min_after_dequeue back and delivers everything once",
          "[queue]") {
  graph g;
  auto q = random_shuffle_queue(g, {dtype::i32},
                                {.shapes = {{}}, .capacity = 100, .min_after_dequeue = 10,
                                 .seed = 5, .timeout_ms = 200},
                                qname("shuffle"));
  auto v = placeholder(g, dtype::i32, {-1}, "v");
  auto enq = q.enqueue_many({v});
  auto deq = q.dequeue_many(10);
  auto close = q.close();
  auto upto = q.dequeue_up_to(100);
  session s(test_runtime(), g);
  std::vector<int32_t> values(50);
  for (int i = 0; i < 50; ++i)
    values[size_t(i)] = i;
  REQUIRE(s.run({{v, tensor::vector<int32_t>(values)}}, {}, {enq}).ok());
  std::multiset<int32_t> seen;
  bool shuffled = false;
  for (int b = 0; b < 4; ++b) {
    auto r = s.run({}, {deq[0]}).value()[0];
    for (int i = 0; i < 10; ++i) {
      seen.insert(r.data<int32_t>()[i]);
      shuffled |= r.data<int32_t>()[i] != b * 10 + i;
    }
  }
  CHECK(shuffled);
  // 10 are left: a fifth dequeue_many would cut into min_after_dequeue, so it times out.
  auto r = s.run({}, {deq[0]});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  REQUIRE(s.run({close}).ok());
  auto rest = s.run({}, {upto[0]}).value()[0];
  CHECK(rest.num_elements() == 10);
  for (int i = 0; i < 10; ++i)
    seen.insert(rest.data<int32_t>()[i]);
  CHECK(seen == std::multiset<int32_t>(values.begin(), values.end()));
}

TEST_CASE("a padding FIFO queue pads dequeue_many to the longest element", "[queue]") {
  graph g;
  auto q = padding_fifo_queue(g, {dtype::i64, dtype::i32}, {.shapes = {{-1}, {}}}, qname("pad"));
  auto seq = placeholder(g, dtype::i64, {-1}, "seq");
  auto len = placeholder(g, dtype::i32, {}, "len");
  auto enq = q.enqueue({seq, len});
  auto deq = q.dequeue_many(3);
  CHECK(deq[0].shape() == shape{3, -1});
  session s(test_runtime(), g);
  for (auto v : {std::vector<int64_t>{1}, {1, 2, 3}, {1, 2}})
    REQUIRE(s.run({{seq, tensor::vector<int64_t>(v)}, {len, tensor::scalar<int32_t>(int(v.size()))}},
                  {}, {enq})
                .ok());
  auto r = s.run({}, {deq[0], deq[1]}).value();
  check_equal(r[0], vals<int64_t>({3, 3}, {1, 0, 0, 1, 2, 3, 1, 2, 0}));
  check_equal(r[1], tensor::vector<int32_t>({1, 3, 2}));
}

TEST_CASE("a priority queue dequeues the smallest priority first, ties in order", "[queue]") {
  graph g;
  auto q = priority_queue(g, {dtype::string}, {.shapes = {{}}}, qname("prio"));
  auto p = placeholder(g, dtype::i64, {-1}, "p");
  auto v = placeholder(g, dtype::string, {-1}, "v");
  auto enq = q.enqueue_many({p, v});
  auto deq = q.dequeue_many(4);
  session s(test_runtime(), g);
  REQUIRE(s.run({{p, tensor::vector<int64_t>({5, 1, 5, 0})},
                 {v, tensor::vector<std::string>({"e", "b", "f", "a"})}},
                {}, {enq})
              .ok());
  auto r = s.run({}, {deq[0], deq[1]}).value();
  check_equal(r[0], tensor::vector<int64_t>({0, 1, 5, 5}));
  check_equal(r[1], tensor::vector<std::string>({"a", "b", "e", "f"}));
}

TEST_CASE("exactly-once delivery under concurrent producers and consumers", "[queue]") {
  graph g;
  auto q = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .capacity = 16}, qname("mpmc"));
  auto v = placeholder(g, dtype::i32, {-1}, "v");
  auto enq = q.enqueue_many({v});
  auto deq = q.dequeue_up_to(7);
  auto close = q.close();
  session s(test_runtime(), g);
  constexpr int producers = 4, per_producer = 500, chunk = 10;
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (int i = 0; i < per_producer; i += chunk) {
        std::vector<int32_t> vals;
        for (int k = 0; k < chunk; ++k)
          vals.push_back(p * per_producer + i + k);
        REQUIRE(s.run({{v, tensor::vector<int32_t>(vals)}}, {}, {enq}).ok());
      }
    });
  std::mutex mu;
  std::vector<int32_t> got;
  std::vector<std::thread> consumers;
  for (int c = 0; c < 3; ++c)
    consumers.emplace_back([&] {
      for (;;) {
        auto r = s.run({}, {deq[0]});
        if (!r) {
          CHECK(r.error().code() == error_code::out_of_range);
          return;
        }
        std::lock_guard lock(mu);
        for (auto x : r.value()[0].flat<int32_t>())
          got.push_back(x);
      }
    });
  for (auto& t : threads)
    t.join();
  REQUIRE(s.run({close}).ok());
  for (auto& t : consumers)
    t.join();
  std::sort(got.begin(), got.end());
  REQUIRE(got.size() == size_t(producers * per_producer));
  for (int i = 0; i < producers * per_producer; ++i)
    REQUIRE(got[size_t(i)] == i);
}

TEST_CASE("queue runners fill a queue until their input ends, then close it", "[queue]") {
  graph g;
  // Stage 1: a queue of 100 numbers, filled once and closed.
  auto source = fifo_queue(g, {dtype::i32}, {.shapes = {{}}}, qname("source"));
  auto v = placeholder(g, dtype::i32, {-1}, "v");
  auto fill = source.enqueue_many({v});
  auto close_source = source.close();
  // Stage 2: two runner loops move numbers (doubled) to a second queue.
  auto sink = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .capacity = 8}, qname("sink"));
  auto moved = source.dequeue()[0] * 2;
  auto enq = sink.enqueue({moved});
  queue_runner runner(sink, {enq, enq});
  auto batch = sink.dequeue_up_to(16);

  session s(test_runtime(), g);
  std::vector<int32_t> values(100);
  for (int i = 0; i < 100; ++i)
    values[size_t(i)] = i;
  REQUIRE(s.run({{v, tensor::vector<int32_t>(values)}}, {}, {fill}).ok());
  REQUIRE(s.run({close_source}).ok());
  coordinator coord;
  REQUIRE(runner.start(s, coord).ok());
  std::vector<int32_t> got;
  for (;;) {
    auto r = s.run({}, {batch[0]});
    if (!r) {
      REQUIRE(r.error().code() == error_code::out_of_range);
      break;
    }
    for (auto x : r.value()[0].flat<int32_t>())
      got.push_back(x);
  }
  std::sort(got.begin(), got.end());
  REQUIRE(got.size() == 100);
  for (int i = 0; i < 100; ++i)
    CHECK(got[size_t(i)] == 2 * i);
  coord.request_stop();
  CHECK(coord.join().ok());
}

TEST_CASE("a runner error stops the coordinator and join returns it", "[queue]") {
  graph g;
  auto sink = fifo_queue(g, {dtype::f32}, {.shapes = {{}}}, qname("errsink"));
  // A placeholder nobody feeds: every run of the enqueue op fails.
  auto never_fed = placeholder(g, dtype::f32, {}, "never_fed");
  auto enq = sink.enqueue({never_fed});
  queue_runner runner(sink, {enq});
  session s(test_runtime(), g);
  coordinator coord;
  REQUIRE(runner.start(s, coord).ok());
  CHECK(coord.wait_for_stop(std::chrono::seconds(10)));
  auto st = coord.join();
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("queue runner op"));
}

TEST_CASE("request_stop unblocks runners waiting on a full queue", "[queue]") {
  graph g;
  auto sink = fifo_queue(g, {dtype::f32}, {.shapes = {{}}, .capacity = 2}, qname("stopsink"));
  auto enq = sink.enqueue({constant(g, 1.f)});
  queue_runner runner(sink, {enq});
  session s(test_runtime(), g);
  coordinator coord;
  REQUIRE(runner.start(s, coord).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the queue fills; the loop blocks
  coord.request_stop();
  CHECK(coord.join(std::chrono::seconds(5)).ok());
}

namespace {

/// A closed queue holding `values` (one int64 vector element each), as a finite input.
graph_queue filled_source(graph& g, session& s, const std::vector<std::vector<int64_t>>& values) {
  auto q = fifo_queue(g, {dtype::i64}, {}, qname("src"));
  auto v = placeholder(g, dtype::i64, {-1}, "src_value");
  auto enq = q.enqueue({v});
  auto close = q.close();
  for (auto& x : values)
    REQUIRE(s.run({{v, tensor::vector<int64_t>(x)}}, {}, {enq}).ok());
  REQUIRE(s.run({close}).ok());
  return q;
}

} // namespace

TEST_CASE("batch with dynamic_pad and allow_smaller_final_batch", "[queue][batching]") {
  graph g;
  session s(test_runtime(), g);
  auto src = filled_source(g, s, {{1}, {1, 2}, {1, 2, 3}, {4}, {5, 6}});
  auto element = src.dequeue()[0];
  auto b = batch({element}, {.batch_size = 2, .num_threads = 1, .dynamic_pad = true,
                             .allow_smaller_final_batch = true, .name = qname("batch")});
  coordinator coord;
  for (auto& r : b.runners)
    REQUIRE(r.start(s, coord).ok());
  std::vector<tensor> got;
  for (;;) {
    auto r = s.run({}, b.tensors);
    if (!r) {
      REQUIRE(r.error().code() == error_code::out_of_range);
      break;
    }
    got.push_back(r.value()[0]);
  }
  REQUIRE(got.size() == 3);
  check_equal(got[0], vals<int64_t>({2, 2}, {1, 0, 1, 2}));
  check_equal(got[1], vals<int64_t>({2, 3}, {1, 2, 3, 4, 0, 0}));
  check_equal(got[2], vals<int64_t>({1, 2}, {5, 6})); // the smaller final batch
  coord.request_stop();
  CHECK(coord.join().ok());
}

TEST_CASE("shuffle_batch delivers every element once, mixed", "[queue][batching]") {
  graph g;
  session s(test_runtime(), g);
  std::vector<std::vector<int64_t>> values;
  for (int64_t i = 0; i < 40; ++i)
    values.push_back({i});
  auto src = filled_source(g, s, values);
  auto b = shuffle_batch({src.dequeue()[0]},
                         {.batch_size = 10, .num_threads = 2, .capacity = 40,
                          .allow_smaller_final_batch = true, .name = qname("shuffle_batch")},
                         /*min_after_dequeue=*/10, /*seed=*/3);
  coordinator coord;
  for (auto& r : b.runners)
    REQUIRE(r.start(s, coord).ok());
  std::vector<int64_t> got;
  for (;;) {
    auto r = s.run({}, b.tensors);
    if (!r)
      break;
    for (auto x : r.value()[0].flat<int64_t>())
      got.push_back(x);
  }
  auto sorted = got;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted.size() == 40);
  for (int64_t i = 0; i < 40; ++i)
    CHECK(sorted[size_t(i)] == i);
  CHECK(got != sorted);
  CHECK(coord.join().ok());
}

TEST_CASE("bucket_by_sequence_length batches similar lengths together", "[queue][batching]") {
  graph g;
  session s(test_runtime(), g);
  // Lengths 1..8, twice.
  std::vector<std::vector<int64_t>> values;
  for (int rep = 0; rep < 2; ++rep)
    for (int64_t n = 1; n <= 8; ++n)
      values.push_back(std::vector<int64_t>(size_t(n), n));
  for (bool to_boundary : {false, true}) {
    auto src = filled_source(g, s, values);
    auto seq = src.dequeue()[0];
    auto length = size(seq); // int32
    auto b = bucket_by_sequence_length(length, {seq}, {3, 6}, {2, 3, 3},
                                       {.pad_to_bucket_boundary = to_boundary,
                                        .allow_smaller_final_batch = true,
                                        .name = qname("bucket")});
    coordinator coord;
    for (auto& r : b.runners)
      REQUIRE(r.start(s, coord).ok());
    int64_t total = 0;
    for (;;) {
      auto r = s.run({}, b.tensors);
      if (!r) {
        REQUIRE(r.error().code() == error_code::out_of_range);
        break;
      }
      auto lengths = r.value()[0].flat<int64_t>();
      auto batch = r.value()[1];
      int64_t lo = *std::min_element(lengths.begin(), lengths.end());
      int64_t hi = *std::max_element(lengths.begin(), lengths.end());
      // Every batch comes from one bucket: [1,3), [3,6) or [6,inf).
      auto bucket = [](int64_t l) { return l < 3 ? 0 : l < 6 ? 1 : 2; };
      CHECK(bucket(lo) == bucket(hi));
      // Padded to the longest, or to the bucket's boundary - 1 (2 and 5; the last is open).
      int64_t want = !to_boundary || bucket(hi) == 2 ? hi : bucket(hi) == 0 ? 2 : 5;
      CHECK(batch.dim(1) == want);
      total += int64_t(lengths.size());
    }
    CHECK(total == 16);
    CHECK(coord.join().ok());
  }
}

TEST_CASE("an element dequeued for an aborted step goes back to the queue", "[queue]") {
  graph g;
  auto a = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .timeout_ms = 5000}, qname("abort_a"));
  auto b = fifo_queue(g, {dtype::i32}, {.shapes = {{}}, .timeout_ms = 100}, qname("abort_b"));
  auto v = placeholder(g, dtype::i32, {}, "v");
  auto enq = a.enqueue({v});
  auto from_a = a.dequeue()[0];
  auto from_b = b.dequeue()[0]; // nobody fills b: the step fails after 100 ms
  session s(test_runtime(), g);
  auto r = s.run({}, {from_a, from_b});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  // The aborted step's dequeue from a is still waiting; the element it gets must not be lost.
  REQUIRE(s.run({{v, tensor::scalar<int32_t>(7)}}, {}, {enq}).ok());
  check_equal(s.run({}, {from_a}).value()[0], tensor::scalar<int32_t>(7));
}
