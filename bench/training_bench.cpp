// Training benchmarks (issue: training). Each compares with a peer or a physical limit in the
// same run:
//   mlp_step        784-512-10 MLP SGD step, batch 100 vs libtorch (bench/peers/mlp_libtorch)
//   mlp_step_bf16   the same step in bfloat16 math (float32 weights) vs mlp_step: speed-up
//                   (target >= 1.3 on CPUs with AVX-512 BF16); mlp_wide_step_bf16 the same for
//                   a 784-2048-10 MLP with batch 512, where the matrix products dominate
//   conv2d_3x3_fwd  Conv2D [32,32,32,64] 3x3 64->64 vs PyTorch/oneDNN channels-last
//   conv2d_3x3_bwd  its input and filter backprops vs PyTorch's (aten::convolution_backward)
//   ckpt_save       saving 100 MB of variables vs write+fsync of the same bytes
//   ckpt_restore    restoring them vs reading the same bytes back
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cpu_info.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/cpu/matmul_dnnl.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/bench/bench_util.hpp"
#include "runnel/bench/peer.hpp"
#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/ops/train/optimizers.hpp"

using namespace runnel;
using namespace runnel::bench;

namespace {

runtime& rt() {
  static runtime* r = new runtime;
  return *r;
}

tensor filled_tensor(shape s, float scale) {
  tensor t(dtype::f32, s);
  auto p = t.flat<float>();
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = scale * (float((i * 2654435761u) % 1000) / 1000.f - 0.5f);
  return t;
}

/// state.range(0): 0 float32, 1 bfloat16 math on float32 weights (mixed precision);
/// state.range(1): 0 the 784-512-10 MLP with batch 100, 1 a wider one (784-2048-10, batch 512)
/// whose matrix products dominate the step.
void bm_mlp_step(benchmark::State& state) {
  bool bf16 = state.range(0) == 1;
  bool wide = state.range(1) == 1;
  int64_t hidden = wide ? 2048 : 512, batch = wide ? 512 : 100;
  auto low = [&](output t) { return to_compute(t, bf16 ? dtype::bf16 : dtype::f32); };
  graph g;
  g.set_seed(1);
  auto x = placeholder(g, dtype::f32, shape{-1, 784}, "x");
  auto y = placeholder(g, dtype::i32, shape{-1}, "y");
  // Variables are runtime-wide by name: each size has its own.
  std::string v = wide ? "wide_" : "";
  auto w1 = variable(g, truncated_normal(g, {784, hidden}, 0.05), v + "w1");
  auto b1 = variable(g, zeros(g, dtype::f32, {hidden}), v + "b1");
  auto w2 = variable(g, truncated_normal(g, {hidden, 10}, 0.05), v + "w2");
  auto b2 = variable(g, zeros(g, dtype::f32, {10}), v + "b2");
  auto h = relu(bias_add(matmul(low(x), low(w1)), low(b1)));
  auto logits = to_compute(bias_add(matmul(h, low(w2)), low(b2)), dtype::f32);
  auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, y).first);
  gradient_descent_optimizer opt(0.01);
  auto train = opt.minimize(loss);
  session s(rt(), g);
  throw_if_error(s.run({global_variables_initializer(g)}));
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i)
    labels[size_t(i)] = i % 10;
  feed_list feeds{{x, filled_tensor({batch, 784}, 1.f)}, {y, tensor::vector<int32_t>(labels)}};
  for (int i = 0; i < 20; ++i)
    throw_if_error(s.run(feeds, {}, {train}).error());
  std::string name = std::string(wide ? "mlp_wide_step" : "mlp_step") + (bf16 ? "_bf16" : "");
  timed_loop(state, name, [&] { throw_if_error(s.run(feeds, {}, {train}).error()); });
}

void bm_conv2d(benchmark::State& state) {
  graph g;
  auto x = constant(g, filled_tensor({32, 32, 32, 64}, 1.f));
  auto f = constant(g, filled_tensor({3, 3, 64, 64}, 0.1f));
  auto y = conv2d(x, f, {1, 1}, "SAME");
  // Constant inputs: the graph optimizer would fold the convolution into a constant.
  session s(rt(), g, {.optimizer = graph_optimizer_options::none()});
  throw_if_error(s.run({}, {y}).error());
  timed_loop(state, "conv2d", [&] {
    auto r = s.run({}, {y});
    benchmark::DoNotOptimize(r);
  });
}

/// Conv2D's two backprops for the forward pass above (the input's and the filter's gradients of
/// one training step), fetched together.
void bm_conv2d_backward(benchmark::State& state) {
  graph g;
  auto x = constant(g, filled_tensor({32, 32, 32, 64}, 1.f));
  auto f = constant(g, filled_tensor({3, 3, 64, 64}, 0.1f));
  auto dy = constant(g, filled_tensor({32, 32, 32, 64}, 1.f));
  attr_map attrs{{"strides", std::vector<int64_t>{1, 1, 1, 1}}, {"padding", std::string("SAME")}};
  auto x_sizes = constant(g, tensor::vector<int32_t>({32, 32, 32, 64}));
  auto f_sizes = constant(g, tensor::vector<int32_t>({3, 3, 64, 64}));
  auto dx = g.build("Conv2DBackpropInput", "dx", {x_sizes.ep(), f.ep(), dy.ep()}, attrs)[0];
  auto df = g.build("Conv2DBackpropFilter", "df", {x.ep(), f_sizes.ep(), dy.ep()}, attrs)[0];
  session s(rt(), g, {.optimizer = graph_optimizer_options::none()}); // as bm_conv2d
  throw_if_error(s.run({}, {dx, df}).error());
  timed_loop(state, "conv2d_backward", [&] {
    auto r = s.run({}, {dx, df});
    benchmark::DoNotOptimize(r);
  });
}

constexpr int ckpt_variables = 25;
constexpr int64_t ckpt_floats = 1 << 20; // 25 × 4 MiB = 100 MiB

std::string bench_dir() {
  auto d = std::filesystem::temp_directory_path() / ("runnel-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

struct ckpt_fixture {
  graph g;
  std::unique_ptr<saver> sv;
  std::unique_ptr<session> s;
  std::string path;
  ckpt_fixture() {
    for (int i = 0; i < ckpt_variables; ++i)
      variable(g, constant(g, filled_tensor({ckpt_floats}, 1.f)), "v" + std::to_string(i));
    sv = std::make_unique<saver>(g, std::vector<output>{}, saver_options{.max_to_keep = 1});
    s = std::make_unique<session>(rt(), g);
    throw_if_error(s->run({global_variables_initializer(g)}));
    path = sv->save(*s, bench_dir() + "/model").value();
  }
};

ckpt_fixture& fixture() {
  static ckpt_fixture* f = new ckpt_fixture;
  return *f;
}

void bm_ckpt_save(benchmark::State& state) {
  auto& f = fixture();
  timed_loop(state, "ckpt_save",
             [&] { f.path = f.sv->save(*f.s, bench_dir() + "/model").value(); });
}

void bm_ckpt_restore(benchmark::State& state) {
  auto& f = fixture();
  timed_loop(state, "ckpt_restore", [&] { throw_if_error(f.sv->restore(*f.s, f.path)); });
}

// The physical limit: write the same bytes with write() + fsync, then read them back.
void bm_disk(benchmark::State& state) {
  bool write_side = state.range(0) == 1;
  size_t bytes = size_t(ckpt_variables) * ckpt_floats * 4;
  std::vector<char> buf(bytes, 1);
  std::string path = bench_dir() + "/raw.bin";
  auto write_file = [&] {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (size_t off = 0; off < bytes;) {
      ssize_t n = ::write(fd, buf.data() + off, bytes - off);
      if (n <= 0)
        break;
      off += size_t(n);
    }
    ::fsync(fd);
    ::close(fd);
  };
  if (!write_side)
    write_file();
  timed_loop(state, write_side ? "disk_write" : "disk_read", [&] {
    if (write_side) {
      write_file();
    } else {
      int fd = ::open(path.c_str(), O_RDONLY);
      for (size_t off = 0; off < bytes;) {
        ssize_t n = ::read(fd, buf.data() + off, bytes - off);
        if (n <= 0)
          break;
        off += size_t(n);
      }
      ::close(fd);
    }
  });
}

} // namespace

BENCHMARK(bm_mlp_step)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond)->MinTime(1.0)->Repetitions(3)->UseRealTime();
BENCHMARK(bm_conv2d)->Unit(benchmark::kMillisecond)->MinTime(1.0)->Repetitions(3)->UseRealTime();
BENCHMARK(bm_conv2d_backward)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(bm_disk)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(2)
    ->UseRealTime();
BENCHMARK(bm_ckpt_save)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(2)
    ->UseRealTime();
BENCHMARK(bm_disk)
    ->Arg(0)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(2)
    ->UseRealTime();
BENCHMARK(bm_ckpt_restore)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(2)
    ->UseRealTime();

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  // Figures compare only within a run, and our machines of one kind differ: say which CPU this
  // is, and which library multiplies on it.
  std::printf("training_bench: %s; float32 products through %s\n",
              runnel::bench::cpu_description().c_str(), runnel::sgemm_library().c_str());
  std::string self = argv[0];
  std::string peers = self.substr(0, self.rfind('/') + 1) + "peers/";
  summaries().push_back({"mlp_step", [peers](std::string& line) {
                           if (!have({"mlp_step"}))
                             return false;
                           double ours = timings()["mlp_step"] * 1e3;
                           // libtorch in its best thread setting (1 thread is often faster
                           // than 2 at this size).
                           double t1 = run_peer(peers + "mlp_libtorch 1 200", "ms_per_step");
                           double t2 = run_peer(peers + "mlp_libtorch 2 200", "ms_per_step");
                           double torch = t1 > 0 && t2 > 0 ? std::min(t1, t2) : std::max(t1, t2);
                           if (torch <= 0) {
                             line = format_line("mlp_step", ours, "ms/step", 0,
                                                "libtorch (peer not built: install libtorch-dev)");
                             return true;
                           }
                           // Step time ratio: ours / libtorch (target <= 0.9).
                           line = format_line("mlp_step", ours, "ms/step", ours / torch,
                                              "libtorch step time, best of 1 and 2 threads");
                           return true;
                         }});
  summaries().push_back({"mlp_step_bf16", [](std::string& line) {
                           if (!have({"mlp_step", "mlp_step_bf16"}))
                             return false;
                           double ours = timings()["mlp_step_bf16"] * 1e3;
                           line = format_line("mlp_step_bf16", ours, "ms/step",
                                              timings()["mlp_step"] / timings()["mlp_step_bf16"],
                                              dnnl_matmul::available()
                                                  ? "mlp_step (float32); oneDNN bfloat16 kernels"
                                                  : "mlp_step (float32); no bfloat16 kernels on "
                                                    "this CPU: widened through float32");
                           if (have({"mlp_wide_step", "mlp_wide_step_bf16"}))
                             line += "\n" + format_line("mlp_wide_step_bf16",
                                                        timings()["mlp_wide_step_bf16"] * 1e3,
                                                        "ms/step",
                                                        timings()["mlp_wide_step"] /
                                                            timings()["mlp_wide_step_bf16"],
                                                        "mlp_wide_step (float32)");
                           return true;
                         }});
  summaries().push_back({"conv2d", [](std::string& line) {
                           if (!have({"conv2d"}))
                             return false;
                           double ours = timings()["conv2d"] * 1e3;
                           double torch =
                               run_peer(std::string("/usr/bin/python3 ") + RUNNEL_SOURCE_DIR +
                                            "/bench/peers/conv2d_torch.py 2",
                                        "ms_per_conv");
                           double flops = 2.0 * 32 * 32 * 32 * 64 * 64 * 9;
                           if (torch <= 0) {
                             line = format_line("conv2d_3x3_fwd", flops / ours / 1e6, "GFLOP/s", 0,
                                                "pytorch (python3-torch not installed)");
                             return true;
                           }
                           // Throughput ratio: torch time / ours (target >= 0.5).
                           line = format_line("conv2d_3x3_fwd", flops / ours / 1e6, "GFLOP/s",
                                              torch / ours, "pytorch_onednn_channels_last");
                           return true;
                         }});
  summaries().push_back({"conv2d_backward", [](std::string& line) {
                           if (!have({"conv2d_backward"}))
                             return false;
                           double ours = timings()["conv2d_backward"] * 1e3;
                           double torch =
                               run_peer(std::string("/usr/bin/python3 ") + RUNNEL_SOURCE_DIR +
                                            "/bench/peers/conv2d_torch.py 2 bwd",
                                        "ms_per_bwd");
                           double flops = 2 * 2.0 * 32 * 32 * 32 * 64 * 64 * 9; // two products
                           line = format_line("conv2d_3x3_bwd", flops / ours / 1e6, "GFLOP/s",
                                              torch > 0 ? torch / ours : 0,
                                              torch > 0 ? "pytorch_onednn_channels_last; target 0.9"
                                                        : "pytorch (python3-torch not installed)");
                           return true;
                         }});
  for (auto [name, disk] :
       {std::pair{"ckpt_save", "disk_write"}, std::pair{"ckpt_restore", "disk_read"}})
    summaries().push_back(
        {name, [name = std::string(name), disk = std::string(disk)](std::string& line) {
           if (!have({name.c_str(), disk.c_str()}))
             return false;
           double mb = double(ckpt_variables) * ckpt_floats * 4 / 1e6;
           double ours = mb / timings()[name];
           double limit = mb / timings()[disk];
           line = format_line(name, ours, "MB/s", ours / limit,
                              disk == "disk_write" ? "write+fsync" : "read");
           return true;
         }});
  int rc = run_main(argc, argv);
  std::filesystem::remove_all(bench_dir());
  return rc;
}
