#include <atomic>
#include <thread>

#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Resources live as long as the shared runtime: a unique name per test.
std::string uname(const std::string& base) {
  static std::atomic<int> n{0};
  return "sr_" + base + "_" + std::to_string(n++);
}

tensor step_t(int64_t s) {
  return tensor::scalar<int64_t>(s);
}

} // namespace

TEST_CASE("a dense accumulator averages a step's gradients and drops stale ones", "[sync]") {
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{2}, {}, uname("acc"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto grad = placeholder(g, dtype::f32, shape{2}, "grad");
  auto apply = acc.apply_grad(step, grad, 0);
  auto apply1 = acc.apply_grad(step, grad, 1);
  auto take = acc.take_grad(constant(g, int32_t(2)));
  auto count = acc.num_accumulated();
  auto dropped = acc.num_dropped();
  session s(test_runtime(), g);
  REQUIRE(s.run({{step, step_t(0)}, {grad, vals<float>({2}, {1, 2})}}, {}, {apply}).ok());
  REQUIRE(s.run({{step, step_t(0)}, {grad, vals<float>({2}, {3, 6})}}, {}, {apply1}).ok());
  check_equal(s.run({}, {count}).value()[0], tensor::scalar<int32_t>(2));
  check_equal(s.run({}, {take}).value()[0], vals<float>({2}, {2, 4}));
  // The take advanced the accumulator to step 1: a step-0 gradient is stale now.
  REQUIRE(s.run({{step, step_t(0)}, {grad, vals<float>({2}, {100, 100})}}, {}, {apply}).ok());
  check_equal(s.run({}, {dropped}).value()[0], tensor::scalar<int64_t>(1));
  check_equal(s.run({}, {count}).value()[0], tensor::scalar<int32_t>(0));
  // A gradient of the wrong shape is refused with both shapes named.
  auto bad = s.run({{step, step_t(1)}, {grad, vals<float>({3}, {1, 2, 3})}}, {}, {apply});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("[3]") && Catch::Contains("[2]"));
}

TEST_CASE("a replica's second gradient for one step is refused and counted", "[sync]") {
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{1}, {}, uname("twice"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto grad = placeholder(g, dtype::f32, shape{1}, "grad");
  auto from0 = acc.apply_grad(step, grad, 0);
  auto from1 = acc.apply_grad(step, grad, 1);
  auto anonymous = acc.apply_grad(step, grad);
  auto take = acc.take_grad(constant(g, int32_t(2)));
  auto count = acc.num_accumulated();
  auto refused = acc.num_refused();
  session s(test_runtime(), g);
  auto send = [&](operation op, int64_t at, float v) {
    REQUIRE(s.run({{step, step_t(at)}, {grad, vals<float>({1}, {v})}}, {}, {op}).ok());
  };
  send(from0, 0, 1);
  send(from0, 0, 100); // resent, or sent again by a restarted replica: not in the mean
  check_equal(s.run({}, {refused}).value()[0], tensor::scalar<int64_t>(1));
  check_equal(s.run({}, {count}).value()[0], tensor::scalar<int32_t>(1));
  send(from1, 0, 3);
  check_equal(s.run({}, {take}).value()[0], vals<float>({1}, {2}));
  // The next step takes one gradient from each replica again.
  send(from0, 1, 5);
  send(from1, 1, 7);
  check_equal(s.run({}, {take}).value()[0], vals<float>({1}, {6}));
  // Gradients that name no replica are not counted per replica.
  send(anonymous, 2, 1);
  send(anonymous, 2, 3);
  check_equal(s.run({}, {take}).value()[0], vals<float>({1}, {2}));
  check_equal(s.run({}, {refused}).value()[0], tensor::scalar<int64_t>(1));
}

TEST_CASE("a take that runs while the gradients arrive waits for them", "[sync]") {
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{1}, {}, uname("wait"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto grad = placeholder(g, dtype::f32, shape{1}, "grad");
  auto apply = acc.apply_grad(step, grad);
  auto take = acc.take_grad(constant(g, int32_t(3)));
  session s(test_runtime(), g);
  auto pending = s.run_async({}, {take});
  for (float v : {1.f, 2.f, 6.f})
    REQUIRE(s.run({{step, step_t(0)}, {grad, vals<float>({1}, {v})}}, {}, {apply}).ok());
  auto r = pending.get();
  REQUIRE(r.ok());
  check_equal(r.value()[0], vals<float>({1}, {3}));
}

TEST_CASE("a sparse accumulator sorts and merges duplicate rows", "[sync]") {
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{5, 2}, {.sparse = true}, uname("sparse"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto idx = placeholder(g, dtype::i64, shape{-1}, "idx");
  auto values = placeholder(g, dtype::f32, shape{-1, 2}, "values");
  auto apply = acc.apply_slices(step, {values, idx, constant(g, tensor::vector<int64_t>({5, 2}))});
  auto taken = acc.take_slices(constant(g, int32_t(2)));
  session s(test_runtime(), g);
  REQUIRE(s.run({{step, step_t(0)},
                 {idx, tensor::vector<int64_t>({3, 1, 3})},
                 {values, vals<float>({3, 2}, {1, 1, 2, 2, 4, 4})}},
                {}, {apply})
              .ok());
  REQUIRE(s.run({{step, step_t(0)},
                 {idx, tensor::vector<int64_t>({0})},
                 {values, vals<float>({1, 2}, {6, 8})}},
                {}, {apply})
              .ok());
  auto r = s.run({}, {taken.indices, taken.values, taken.dense_shape}).value();
  check_equal(r[0], tensor::vector<int64_t>({0, 1, 3}));
  // Mean over the two gradients: row 3 is (1 + 4) / 2.
  check_equal(r[1], vals<float>({3, 2}, {3, 4, 1, 1, 2.5, 2.5}));
  check_equal(r[2], tensor::vector<int64_t>({5, 2}));
  // An index outside the table is refused, naming it.
  auto bad = s.run({{step, step_t(1)},
                    {idx, tensor::vector<int64_t>({7})},
                    {values, vals<float>({1, 2}, {1, 1})}},
                   {}, {apply});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("index 7"));
}

TEST_CASE("a take that times out names the replicas that sent nothing", "[sync]") {
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{1},
                                     {.total_num_replicas = 3, .timeout_ms = 50}, uname("late"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto apply = acc.apply_grad(step, constant(g, vals<float>({1}, {1})), 1);
  auto take = acc.take_grad(constant(g, int32_t(2)));
  session s(test_runtime(), g);
  REQUIRE(s.run({{step, step_t(0)}}, {}, {apply}).ok());
  auto r = s.run({}, {take});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains("1 of the 2") &&
                                      Catch::Contains("nothing from replicas 0, 2 (of 3)"));
}

TEST_CASE("after a chief's step failed, a gradient at the step a new chief restores counts",
          "[sync]") {
  // The cluster test that found it: worker 1 killed at step 31, both workers restarted, the chief
  // from its step-30 checkpoint; worker 1 read step 30 after the restore but before the chief's
  // init set the accumulators back from 31 to 30, so its gradient was dropped as stale and the
  // chief's first step timed out waiting for it.
  graph g;
  auto acc = conditional_accumulator(g, dtype::f32, shape{1},
                                     {.total_num_replicas = 2, .timeout_ms = 50}, uname("rewind"));
  auto step = placeholder(g, dtype::i64, shape{}, "step");
  auto grad = placeholder(g, dtype::f32, shape{1}, "grad");
  auto from0 = acc.apply_grad(step, grad, 0);
  auto from1 = acc.apply_grad(step, grad, 1);
  auto set_step = acc.set_global_step(step);
  auto take = acc.take_grad(constant(g, int32_t(2)));
  auto dropped = acc.num_dropped();
  session s(test_runtime(), g);
  auto send = [&](operation op, int64_t at, float v) {
    REQUIRE(s.run({{step, step_t(at)}, {grad, vals<float>({1}, {v})}}, {}, {op}).ok());
  };
  REQUIRE(s.run({{step, step_t(31)}}, {}, {set_step}).ok());
  send(from0, 31, 2);
  auto failed = s.run({}, {take}); // replica 1 was killed: the old chief's step fails
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code() == error_code::unavailable);
  send(from1, 30, 4);  // the restarted worker, at the restored step: held, not dropped
  send(from1, 29, 50); // older than the step the new chief sets: dropped when it sets it
  check_equal(s.run({}, {dropped}).value()[0], tensor::scalar<int64_t>(0));
  REQUIRE(s.run({{step, step_t(30)}}, {}, {set_step}).ok());
  check_equal(s.run({}, {dropped}).value()[0], tensor::scalar<int64_t>(1));
  // Replica 0's gradient from the old chief's step stays (computed at 31 >= 30), so the new
  // chief's own at 30 is its second; the step takes the two it has.
  send(from0, 30, 100);
  check_equal(s.run({}, {take}).value()[0], vals<float>({1}, {3}));
  // From here on a stale gradient is dropped at once again.
  send(from1, 30, 1);
  check_equal(s.run({}, {dropped}).value()[0], tensor::scalar<int64_t>(2));
}

TEST_CASE("a worker with another total_num_replicas than the chief's is refused", "[sync]") {
  auto name = uname("mismatch");
  graph a, b;
  auto acc_a = conditional_accumulator(a, dtype::f32, shape{1}, {.shared_name = name,
                                                                 .total_num_replicas = 3});
  auto acc_b = conditional_accumulator(b, dtype::f32, shape{1}, {.shared_name = name,
                                                                 .total_num_replicas = 2});
  session sa(test_runtime(), a), sb(test_runtime(), b);
  REQUIRE(sa.run({}, {acc_a.num_accumulated()}).ok());
  auto r = sb.run({}, {acc_b.num_accumulated()});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("total_num_replicas 3") &&
                                      Catch::Contains("total_num_replicas 2"));
}

namespace {

/// One replica's copy of a linear model y = x·w trained with squared error.
struct replica_model {
  graph g;
  graph_variable w, step;
  output x, t, loss;
  std::unique_ptr<gradient_descent_optimizer> sgd;
  std::unique_ptr<sync_replicas_optimizer> opt;
  operation train, init, open_gate;

  /// `gated`: each step's gradient waits until open_gate runs (a slow worker, on cue).
  replica_model(const std::string& prefix, int replica, int aggregate, int total,
                int64_t timeout_ms = 60'000, bool gated = false) {
    w = variable(g, constant(g, vals<float>({2, 1}, {0.5f, -0.5f})), prefix + "_w");
    step = variable(g, constant(g, int64_t(0)), prefix + "_step", false);
    x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
    t = placeholder(g, dtype::f32, shape{-1, 1}, "t");
    output xin = x;
    if (gated) {
      auto gate = fifo_queue(g, {dtype::f32}, {.shapes = {shape{}},
                                               .shared_name = prefix + "_gate"});
      open_gate = gate.enqueue({constant(g, 1.f)});
      auto wait = g.control_dependencies({operation(gate.dequeue()[0])});
      xin = identity(x);
    }
    loss = mean(square(sub(matmul(xin, w), t)));
    sgd = std::make_unique<gradient_descent_optimizer>(0.1);
    opt = std::make_unique<sync_replicas_optimizer>(
        *sgd, sync_replicas_options{.replicas_to_aggregate = aggregate,
                                    .total_num_replicas = total,
                                    .replica = replica,
                                    .timeout_ms = timeout_ms});
    train = opt->minimize(loss, step);
    init = global_variables_initializer(g);
  }
};

tensor batch_x(int replica, int k) {
  float a = float(replica + 1), b = float(k + 1);
  return vals<float>({2, 2}, {a, b, b * 0.5f, -a});
}
tensor batch_t(int replica, int k) {
  return vals<float>({2, 1}, {float(k) - float(replica), 1.0f});
}

} // namespace

TEST_CASE("sync replicas train exactly as one process averaging their gradients", "[sync]") {
  auto prefix = uname("model");
  const int steps = 6;
  tensor w_sync, step_sync;
  {
    replica_model chief(prefix, 0, 2, 2), other(prefix, 1, 2, 2);
    session s0(test_runtime(), chief.g), s1(test_runtime(), other.g);
    REQUIRE(s0.run({chief.init}).ok());
    auto work = [&](replica_model& m, session& s, int r) {
      for (int k = 0; k < steps; ++k) {
        auto st = s.run({{m.x, batch_x(r, k)}, {m.t, batch_t(r, k)}}, {}, {m.train});
        if (!st.ok())
          return st.error();
      }
      return status();
    };
    status other_status;
    std::thread t1([&] { other_status = work(other, s1, 1); });
    status chief_status = work(chief, s0, 0);
    t1.join();
    INFO(chief_status.to_string() << " / " << other_status.to_string());
    REQUIRE(chief_status.ok());
    REQUIRE(other_status.ok());
    auto r = s0.run({}, {chief.w.value, chief.step.value, chief.opt->ops().dropped}).value();
    w_sync = r[0];
    step_sync = r[1];
    check_equal(r[2], tensor::scalar<int64_t>(0));
  }
  // The same steps in one graph: w -= 0.1 * (g0 + g1) / 2.
  graph g;
  auto w = variable(g, constant(g, vals<float>({2, 1}, {0.5f, -0.5f})), uname("ref_w"));
  auto x0 = placeholder(g, dtype::f32, shape{-1, 2}), t0 = placeholder(g, dtype::f32, shape{-1, 1});
  auto x1 = placeholder(g, dtype::f32, shape{-1, 2}), t1 = placeholder(g, dtype::f32, shape{-1, 1});
  auto l0 = mean(square(sub(matmul(x0, w), t0)));
  auto l1 = mean(square(sub(matmul(x1, w), t1)));
  auto g0 = gradients({l0}, {w.ref})[0], g1 = gradients({l1}, {w.ref})[0];
  auto avg = mul(add(g0, g1), constant(g, 0.5f));
  auto update = assign(w, sub(w.value, mul(avg, constant(g, 0.1f))));
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  for (int k = 0; k < steps; ++k)
    REQUIRE(s.run({{x0, batch_x(0, k)}, {t0, batch_t(0, k)}, {x1, batch_x(1, k)},
                   {t1, batch_t(1, k)}},
                  {}, {operation(update)})
                .ok());
  check_close(w_sync, s.run({}, {w.value}).value()[0], 1e-6, 1e-6);
  check_equal(step_sync, tensor::scalar<int64_t>(steps));
}

TEST_CASE("with a backup replica a step needs only the first N gradients", "[sync]") {
  auto prefix = uname("backup");
  replica_model chief(prefix, 0, 2, 3), fast(prefix, 1, 2, 3),
      slow(prefix, 2, 2, 3, 60'000, /*gated=*/true);
  session s0(test_runtime(), chief.g), s1(test_runtime(), fast.g), s2(test_runtime(), slow.g);
  REQUIRE(s0.run({chief.init}).ok());
  // The slow replica starts step 0 (its local step is 0) but its gradient waits for the gate.
  auto late = s2.run_async({{slow.x, batch_x(2, 0)}, {slow.t, batch_t(2, 0)}}, {}, {slow.train});
  std::atomic<int> fast_ok{0};
  std::thread t1([&] {
    for (int k = 0; k < 3; ++k)
      fast_ok += s1.run({{fast.x, batch_x(1, k)}, {fast.t, batch_t(1, k)}}, {}, {fast.train}).ok();
  });
  for (int k = 0; k < 3; ++k)
    REQUIRE(s0.run({{chief.x, batch_x(0, k)}, {chief.t, batch_t(0, k)}}, {}, {chief.train}).ok());
  t1.join();
  CHECK(fast_ok == 3);
  // Three steps without it.
  check_equal(s0.run({}, {chief.step.value}).value()[0], tensor::scalar<int64_t>(3));
  // Its step-0 gradient arrives at step 3: dropped and counted; it goes on from step 3.
  REQUIRE(s2.run({slow.open_gate}).ok());
  auto r = late.get();
  INFO((r.ok() ? std::string() : r.error().to_string()));
  REQUIRE(r.ok());
  check_equal(s0.run({}, {chief.opt->ops().dropped}).value()[0], tensor::scalar<int64_t>(1));
}

TEST_CASE("when too few replicas are alive every worker's step fails naming the missing", "[sync]") {
  auto prefix = uname("dead");
  replica_model chief(prefix, 0, 2, 2, /*timeout_ms=*/200);
  session s0(test_runtime(), chief.g);
  REQUIRE(s0.run({chief.init}).ok());
  // Replica 1 never starts: the chief's loop times out and fails the token barrier.
  auto r = s0.run({{chief.x, batch_x(0, 0)}, {chief.t, batch_t(0, 0)}}, {}, {chief.train});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::unavailable);
  CHECK_THAT(r.error().message(), Catch::Contains("nothing from replica 1 (of 2)"));
}

TEST_CASE("when the chief's session closes the other workers stop instead of hanging", "[sync]") {
  auto prefix = uname("end");
  replica_model chief(prefix, 0, 2, 2), other(prefix, 1, 2, 2, 60'000, /*gated=*/true);
  auto s0 = std::make_unique<session>(test_runtime(), chief.g);
  session s1(test_runtime(), other.g);
  REQUIRE(s0->run({chief.init}).ok());
  REQUIRE(s0->run({chief.opt->ops().local_init}).ok());
  // The chief's loop is running (its first train op set it up) and the other worker waits...
  auto pending = s1.run_async({{other.x, batch_x(1, 0)}, {other.t, batch_t(1, 0)}}, {},
                              {other.train});
  auto first = s0->run_async({{chief.x, batch_x(0, 0)}, {chief.t, batch_t(0, 0)}}, {},
                             {chief.train});
  REQUIRE(s1.run({other.open_gate}).ok());
  REQUIRE(first.get().ok());
  REQUIRE(pending.get().ok());
  // ... then the chief ends training; the other's next step ends with out_of_range.
  s0.reset();
  REQUIRE(s1.run({other.open_gate}).ok());
  auto r = s1.run({{other.x, batch_x(1, 1)}, {other.t, batch_t(1, 1)}}, {}, {other.train});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::out_of_range);
  CHECK_THAT(r.error().message(), Catch::Contains("training ended"));
}

TEST_CASE("a worker whose chief never runs gives up waiting, saying so", "[sync]") {
  auto prefix = uname("nochief");
  replica_model chief(prefix, 0, 2, 2), other(prefix, 1, 2, 2, /*timeout_ms=*/100);
  session s0(test_runtime(), chief.g), s1(test_runtime(), other.g);
  REQUIRE(s0.run({chief.init}).ok()); // initialised, but the chief never trains
  auto r = s1.run({{other.x, batch_x(1, 0)}, {other.t, batch_t(1, 0)}}, {}, {other.train});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::deadline_exceeded);
  CHECK_THAT(r.error().message(), Catch::Contains("the chief (replica 0) finished no sync step"));
}
