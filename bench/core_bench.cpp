// Core engine benchmarks (issue: core engine). Each compares with a reference measured in the
// same run:
//   matmul_f32_N   session MatMul vs cblas_sgemm called directly on the same data
//   matmul_bf16_2048  session MatMul in bfloat16 (oneDNN) vs matmul_f32_2048: FLOP/s ratio
//                  (target >= 1.5 on CPUs with AVX-512 BF16)
//   node_overhead  a chain of 1000 tiny Adds as one step, per node, vs one CAF message hop (and
//                  the same chain with every firing a message: what inline firing saves)
//   run_overhead   session::run of a one-node graph vs a bare actor round trip
//   add_f32_64mib  element-wise Add of two 64 MiB tensors vs memcpy bandwidth
//   tanh_f32_64mib Tanh of a 64 MiB tensor (bound by arithmetic, not bytes) vs memcpy bandwidth,
//                  with the vector ISA its kernel picked (ops/cpu/unary_wide.hpp)
#include <cblas.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "cpu_info.hpp"
#include "runnel/actors/exec/scheduler.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/bench/bench_util.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/cpu/matmul_dnnl.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/storage/crc32c.hpp"

extern "C" char* openblas_get_corename();
extern "C" int openblas_get_num_threads();

using namespace runnel;
using namespace runnel::bench;

namespace {

runtime& rt() {
  static runtime* r = new runtime; // never destroyed: see tests/eval.hpp
  return *r;
}

tensor random_matrix(int64_t n) {
  tensor t(dtype::f32, shape{n, n});
  auto p = t.flat<float>();
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = float((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  return t;
}

void bm_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  graph g;
  auto a = constant(g, random_matrix(n));
  auto b = constant(g, random_matrix(n));
  auto c = matmul(a, b);
  // Constant inputs: the graph optimizer would fold the product into a constant.
  session s(rt(), g, {.optimizer = graph_optimizer_options::none()});
  throw_if_error(s.run({}, {c}).error());
  timed_loop(state, "matmul_" + std::to_string(n), [&] {
    auto r = s.run({}, {c});
    benchmark::DoNotOptimize(r);
  });
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(n * n * n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_matmul_bf16(benchmark::State& state) {
  int64_t n = state.range(0);
  auto narrow = [](const tensor& f) {
    tensor t(dtype::bf16, f.shape());
    for (int64_t i = 0; i < f.num_elements(); ++i)
      t.data<runnel::bfloat16>()[i] = runnel::bfloat16(f.data<float>()[i]);
    return t;
  };
  graph g;
  auto c = matmul(constant(g, narrow(random_matrix(n))), constant(g, narrow(random_matrix(n))));
  session s(rt(), g, {.optimizer = graph_optimizer_options::none()}); // as bm_matmul
  throw_if_error(s.run({}, {c}).error());
  timed_loop(state, "matmul_bf16_" + std::to_string(n), [&] {
    auto r = s.run({}, {c});
    benchmark::DoNotOptimize(r);
  });
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(n * n * n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_sgemm(benchmark::State& state) {
  int64_t n = state.range(0);
  auto a = random_matrix(n), b = random_matrix(n);
  tensor c(dtype::f32, shape{n, n});
  // OpenBLAS at its best: its own threads, one per core (a runtime sets it to one thread per call
  // and splits products over the device's pool instead).
  int before = runnel::set_blas_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  timed_loop(state, "sgemm_" + std::to_string(n), [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.f,
                a.data<float>(), int(n), b.data<float>(), int(n), 0.f, c.data<float>(), int(n));
    benchmark::ClobberMemory();
  });
  runnel::set_blas_threads(before);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(n * n * n), benchmark::Counter::kIsIterationInvariantRate);
}

constexpr int chain_length = 1000;

void bm_node_overhead(benchmark::State& state) {
  graph g;
  auto one = constant(g, 1.f);
  output x = constant(g, 0.f);
  for (int i = 0; i < chain_length; ++i)
    x = x + one;
  // The executor's cost per node: the graph optimizer would fold the chain into one constant.
  // Arg 0: every firing a message, to show what inline firing saves.
  bool inline_firing = state.range(0) != 0;
  session s(rt(), g, {.optimizer = graph_optimizer_options::none(), .inline_firing = inline_firing});
  throw_if_error(s.run({}, {x}).error());
  timed_loop(state, inline_firing ? "chain" : "chain_by_message", [&] {
    auto r = s.run({}, {x});
    benchmark::DoNotOptimize(r);
  });
}

// The substrate's floor: one message hop between CAF actors in a chain of the same length, with
// the runtime's scheduler settings.
void bm_caf_hop(benchmark::State& state) {
  caf::actor_system_config cfg;
  configure_scheduler(cfg, int(std::thread::hardware_concurrency()));
  caf::actor_system sys(cfg);
  std::atomic<uint32_t> done{0};
  caf::actor next = sys.spawn([&done](caf::event_based_actor*) -> caf::behavior {
    return {[&done](int32_t) {
      done.store(1);
      done.notify_all();
    }};
  });
  for (int i = 0; i < chain_length; ++i)
    next = sys.spawn([next](caf::event_based_actor* self) -> caf::behavior {
      return {[self, next](int32_t v) { self->send(next, v + 1); }};
    });
  timed_loop(state, "caf_chain", [&] {
    done.store(0);
    caf::anon_send(next, int32_t(0));
    while (!done.load())
      done.wait(0);
  });
  next = nullptr;
}

void bm_run_overhead(benchmark::State& state) {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{}, "x");
  auto y = identity(x);
  session s(rt(), g);
  feed_list feeds{{x, tensor::scalar<float>(1)}};
  throw_if_error(s.run(feeds, {y}).error());
  timed_loop(state, "run", [&] {
    auto r = s.run(feeds, {y});
    benchmark::DoNotOptimize(r);
  });
}

// The floor of a run: the caller sends to an actor, which signals back through an atomic
// (the same scheduler settings and wake-up path a session uses).
void bm_actor_round_trip(benchmark::State& state) {
  caf::actor_system_config cfg;
  configure_scheduler(cfg, int(std::thread::hardware_concurrency()));
  caf::actor_system sys(cfg);
  std::atomic<uint32_t> done{0};
  auto a = sys.spawn([&done](caf::event_based_actor*) -> caf::behavior {
    return {[&done](int32_t) {
      done.store(1);
      done.notify_all();
    }};
  });
  timed_loop(state, "round_trip", [&] {
    done.store(0);
    caf::anon_send(a, int32_t(1));
    while (!done.load())
      done.wait(0);
  });
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

constexpr int64_t add_elements = (int64_t(64) << 20) / 4;

void bm_add(benchmark::State& state) {
  graph g;
  tensor a(dtype::f32, shape{add_elements}), b(dtype::f32, shape{add_elements});
  std::fill_n(a.data<float>(), add_elements, 1.f);
  std::fill_n(b.data<float>(), add_elements, 2.f);
  auto c = constant(g, a) + constant(g, b);
  session s(rt(), g);
  throw_if_error(s.run({}, {c}).error());
  timed_loop(state, "add", [&] {
    auto r = s.run({}, {c});
    benchmark::DoNotOptimize(r);
  });
  state.SetBytesProcessed(state.iterations() * 3 * add_elements * 4);
}

void bm_tanh(benchmark::State& state) {
  graph g;
  tensor a(dtype::f32, shape{add_elements});
  for (int64_t i = 0; i < add_elements; ++i)
    a.data<float>()[i] = float(i % 1000) * 0.006f - 3.f;
  auto x = placeholder(g, dtype::f32, shape{add_elements}, "x");
  auto y = tanh(x);
  session s(rt(), g);
  feed_list feeds{{x, a}};
  throw_if_error(s.run(feeds, {y}).error());
  timed_loop(state, "tanh", [&] {
    auto r = s.run(feeds, {y});
    benchmark::DoNotOptimize(r);
  });
  state.SetBytesProcessed(state.iterations() * 2 * add_elements * 4);
}

void bm_memcpy(benchmark::State& state) {
  int threads = int(state.range(0));
  size_t bytes = size_t(add_elements) * 4;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  timed_loop(state, "memcpy_" + std::to_string(threads), [&] {
    if (threads == 1) {
      std::memcpy(dst.data(), src.data(), bytes);
    } else {
      std::vector<std::thread> ts;
      size_t per = bytes / size_t(threads);
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
          std::memcpy(dst.data() + size_t(t) * per, src.data() + size_t(t) * per, per);
        });
      for (auto& t : ts)
        t.join();
    }
    benchmark::ClobberMemory();
  });
  state.SetBytesProcessed(state.iterations() * 2 * int64_t(bytes));
}

// CRC32C of 64 MiB on one core (issue: record files), against a one-thread memcpy of it.
void bm_crc32c(benchmark::State& state) {
  std::vector<char> data(size_t(64) << 20, 7);
  uint32_t sink = 0;
  timed_loop(state, "crc32c", [&] { sink ^= crc32c(data.data(), data.size()); });
  benchmark::DoNotOptimize(sink);
}

} // namespace

// Each measurement sits next to its reference, repeated, so both see the same machine state.
BENCHMARK(bm_sgemm)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_matmul)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.3)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_sgemm)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_matmul)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_sgemm)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_matmul)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_matmul_bf16)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_caf_hop)->Unit(benchmark::kMicrosecond)->MinTime(0.5)->Repetitions(3)->UseRealTime();
BENCHMARK(bm_node_overhead)
    ->Arg(1)
    ->Arg(0)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_actor_round_trip)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_run_overhead)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_memcpy)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_crc32c)->Unit(benchmark::kMillisecond)->MinTime(0.5)->Repetitions(3)->UseRealTime();
BENCHMARK(bm_add)->Unit(benchmark::kMillisecond)->MinTime(0.5)->Repetitions(3)->UseRealTime();
BENCHMARK(bm_tanh)->Unit(benchmark::kMillisecond)->MinTime(0.5)->Repetitions(3)->UseRealTime();

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  // Figures compare only within a run, and our machines of one kind differ: say which CPU this
  // is, and which library multiplies on it.
  std::printf("core_bench: %s; float32 products through %s\n",
              runnel::bench::cpu_description().c_str(), runnel::sgemm_library().c_str());
  std::printf("openblas: core %s, %d threads\n", openblas_get_corename(),
              openblas_get_num_threads());
  for (int n : {256, 1024, 2048})
    summaries().push_back(
        {"matmul", [n](std::string& line) {
           auto m = "matmul_" + std::to_string(n), s = "sgemm_" + std::to_string(n);
           if (!have({m.c_str(), s.c_str()}))
             return false;
           double flops = 2.0 * n * double(n) * n;
           line = format_line("matmul_f32_" + std::to_string(n), flops / timings()[m] / 1e9,
                              "GFLOP/s", timings()[s] / timings()[m], "openblas");
           return true;
         }});
  summaries().push_back({"matmul_bf16", [](std::string& line) {
                           if (!have({"matmul_bf16_2048", "matmul_2048"}))
                             return false;
                           double flops = 2.0 * 2048 * 2048 * 2048.0;
                           line = format_line("matmul_bf16_2048",
                                              flops / timings()["matmul_bf16_2048"] / 1e9,
                                              "GFLOP/s",
                                              timings()["matmul_2048"] /
                                                  timings()["matmul_bf16_2048"],
                                              runnel::dnnl_matmul::available()
                                                  ? "matmul_f32_2048; oneDNN bfloat16 kernels"
                                                  : "matmul_f32_2048; no bfloat16 kernels on "
                                                    "this CPU: widened through float32");
                           return true;
                         }});
  summaries().push_back({"node_overhead", [](std::string& line) {
                           if (!have({"chain", "caf_chain"}))
                             return false;
                           double per = timings()["chain"] / chain_length * 1e6;
                           double hop = timings()["caf_chain"] / chain_length * 1e6;
                           line = format_line("node_overhead", per, "us/node", per / hop,
                                              "caf_message_hop");
                           if (have({"chain_by_message"})) {
                             char by_message[96];
                             std::snprintf(by_message, sizeof by_message,
                                           "; every firing a message: %.3g us/node",
                                           timings()["chain_by_message"] / chain_length * 1e6);
                             line += by_message;
                           }
                           return true;
                         }});
  summaries().push_back({"run_overhead", [](std::string& line) {
                           if (!have({"run", "round_trip"}))
                             return false;
                           double us = timings()["run"] * 1e6;
                           line = format_line("run_overhead", us, "us/run",
                                              us / (timings()["round_trip"] * 1e6),
                                              "actor_round_trip");
                           return true;
                         }});
  // An element-wise op over 64 MiB tensors that moves `tensors` of them, against the faster of
  // the one- and two-thread memcpy (which moves two).
  auto against_memcpy = [](const char* timing, const char* name, int tensors, std::string note) {
    summaries().push_back({timing, [=](std::string& line) {
                             if (!have({timing, "memcpy_1", "memcpy_2"}))
                               return false;
                             double bytes = double(add_elements) * 4;
                             double bw = tensors * bytes / timings()[timing] / 1e9;
                             double copy_bw =
                                 2 * bytes /
                                 std::min(timings()["memcpy_1"], timings()["memcpy_2"]) / 1e9;
                             line = format_line(name, bw, "GB/s", bw / copy_bw, note);
                             return true;
                           }});
  };
  against_memcpy("add", "add_f32_64mib", 3, "memcpy");
  std::string isa = unary_wide_isa();
  against_memcpy("tanh", "tanh_f32_64mib", 2,
                 "memcpy; vectors " + (isa.empty() ? std::string("baseline") : isa));
  summaries().push_back({"crc32c", [](std::string& line) {
                           if (!have({"crc32c", "memcpy_1"}))
                             return false;
                           double bytes = double(64 << 20);
                           double gbs = bytes / timings()["crc32c"] / 1e9;
                           double copy = bytes / timings()["memcpy_1"] / 1e9; // bytes read
                           line = format_line("crc32c", gbs, "GB/s", gbs / copy,
                                              std::string("one-thread memcpy read rate, ") +
                                                  (crc32c_hardware() ? "sse4.2" : "portable"));
                           return true;
                         }});
  return run_main(argc, argv);
}
