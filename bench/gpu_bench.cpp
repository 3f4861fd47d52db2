// GPU benchmarks (scripts/gpu-check; needs a GPU). Each compares, in the same run, with a peer:
//   gpu_matmul_{f32,tf32,bf16}_4096  matmul_cuda vs cublasGemmEx on the same buffers (>= 0.95x)
//   gpu_conv2d_3x3_{f32,bf16}        conv2d_cuda (NHWC, HWIO filter) vs cudnnConvolutionForward with
//                                    prepared descriptors, its best algorithm (>= 0.9x)
//   gpu_mlp_step, gpu_cnn_step       a Fashion-MNIST training step (apps/train/fashion_mnist_model.cpp,
//                                    batch 100, Adam, fed from host memory) through a session vs
//                                    the same model in PyTorch on this GPU (--torch-*-ms, from
//                                    bench/peers/fashion_mnist_torch_gpu.py), step time ratio
//                                    (<= 0.9x)
//   gpu_lstm_lm_step                 bench lstm_lm_step's language model (bench/lstm_lm_graph.hpp)
//                                    vs PyTorch's nn.LSTM on cuDNN (bench/peers/lstm_lm_torch.py
//                                    cuda) on this GPU (<= 1.0x)
//   *_peak_memory                    each step's peak GPU memory (the allocator's, over the timed
//                                    steps, variables included) vs PyTorch's
//                                    max_memory_allocated (--torch-*-peak-mib) (<= 1.1x)
// Inputs are random (zeros run faster on some GPUs and hide unwritten outputs). Kernel timings
// are CUDA events around 20 calls after a warm-up, median of 5 rounds.
//   gpu_bench [--torch-{mlp,cnn,lm}-ms X] [--torch-{mlp,cnn,lm}-peak-mib Y]
//             [--torch "version line"] [--only NAME]
//             [--trace-dir DIR]   (a Chrome trace of one training step per model and mode)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/train/fashion_mnist_model.hpp"
#include "runnel/bench/lstm_lm_graph.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/cuda/kernels.hpp"

using namespace runnel;

namespace {

/// Milliseconds per call of `f` on the compute stream: the median of 5 rounds of 20 calls.
double time_ms(gpu_context& gpu, const std::function<void()>& f) {
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r)
    rounds.push_back(stream_seconds(gpu.compute(), f, 20) * 1e3);
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

/// A device tensor of uniform values in [-1, 1).
tensor random_device(gpu_context& gpu, dtype t, const shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  tensor f(dtype::f32, s);
  for (auto& v : f.flat<float>())
    v = d(rng);
  tensor dev = gpu.to_device(f, "bench").value();
  if (t != dtype::f32) {
    tensor narrow;
    throw_if_error(cast_cuda(gpu, dev, t, &narrow, "bench"));
    dev = narrow;
  }
  throw_if_error(gpu.synchronize());
  return dev;
}

void matmul_line(gpu_context& gpu, const char* label, dtype t, bool tf32, int64_t n) {
  tensor a = random_device(gpu, t, shape{n, n}, 1), b = random_device(gpu, t, shape{n, n}, 2);
  tensor c = gpu.allocate(t, shape{n, n}, "c").value();
  double ours = time_ms(gpu, [&] {
    tensor out;
    throw_if_error(matmul_cuda(gpu, a, b, {.allow_tf32 = tf32}, &out, "bench"));
  });
  cudaDataType_t dt = t == dtype::bf16 ? CUDA_R_16BF : t == dtype::f16 ? CUDA_R_16F : CUDA_R_32F;
  auto compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  float one = 1, zero = 0;
  double direct = time_ms(gpu, [&] {
    cublasGemmEx(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(n), int(n), &one, b.raw_data(),
                 dt, int(n), a.raw_data(), dt, int(n), &zero, c.raw_data(), dt, int(n), compute,
                 CUBLAS_GEMM_DEFAULT);
  });
  double tflops = 2.0 * double(n) * n * n / (ours * 1e-3) / 1e12;
  std::printf("bench %s: %.1f TFLOP/s (%.2fx cublasGemmEx, %.1f TFLOP/s) target >= 0.95x\n", label,
              tflops, direct / ours, 2.0 * double(n) * n * n / (direct * 1e-3) / 1e12);
}

void conv_line(gpu_context& gpu, const char* label, dtype t) {
  constexpr int n = 32, h = 32, w = 32, c = 64, k = 64;
  tensor x = random_device(gpu, t, shape{n, h, w, c}, 3);
  tensor f = random_device(gpu, t, shape{3, 3, c, k}, 4);
  tensor krsc = random_device(gpu, t, shape{k, 3, 3, c}, 5);
  tensor y = gpu.allocate(t, shape{n, h, w, k}, "y").value();
  double ours = time_ms(gpu, [&] {
    tensor out;
    throw_if_error(conv2d_cuda(gpu, x, f, {}, &out, "bench"));
  });
  cudnnDataType_t dt = t == dtype::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t fd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&fd);
  cudnnCreateConvolutionDescriptor(&cd);
  cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, dt, n, c, h, w);
  cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, dt, n, k, h, w);
  cudnnSetFilter4dDescriptor(fd, dt, CUDNN_TENSOR_NHWC, k, c, 3, 3);
  cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnSetConvolutionMathType(cd, t == dtype::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH);
  // The peer gets cuDNN's measured best algorithm, not only its first heuristic guess.
  tensor ws_probe = gpu.allocate(dtype::u8, shape{int64_t(256) << 20}, "ws").value();
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int returned = 0;
  throw_if_error(cudnn_status(
      cudnnFindConvolutionForwardAlgorithmEx(gpu.cudnn(), xd, x.raw_data(), fd, krsc.raw_data(), cd,
                                             yd, y.raw_data(), 8, &returned, perf,
                                             ws_probe.raw_data(), ws_probe.bytes()),
      "cudnnFindConvolutionForwardAlgorithmEx"));
  float one = 1, zero = 0;
  double direct = time_ms(gpu, [&] {
    cudnnConvolutionForward(gpu.cudnn(), &one, xd, x.raw_data(), fd, krsc.raw_data(), cd,
                            perf[0].algo, ws_probe.raw_data(), perf[0].memory, &zero, yd,
                            y.raw_data());
  });
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(fd);
  cudnnDestroyConvolutionDescriptor(cd);
  double gflops = 2.0 * n * h * w * c * k * 9 / (ours * 1e-3) / 1e9;
  auto chosen = conv2d_cuda_forward_algorithm(gpu, x.shape(), f.shape(), t, {});
  std::printf("bench %s: %.0f GFLOP/s, %.1f us, algo %d (%.2fx cudnnConvolutionForward, algo %d, "
              "%.1f us) target >= 0.9x\n",
              label, gflops, ours * 1e3, chosen.ok() ? chosen->first : -1, direct / ours,
              int(perf[0].algo), direct * 1e3);
  std::printf("gpu_bench: %s: cuDNN's search found", label);
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS)
      std::printf(" algo %d %.1f us (%zu B)", int(perf[i].algo), double(perf[i].time) * 1e3,
                  perf[i].memory);
  std::printf("\n");
}

/// One traced step's nodes summed by op and device: where a step's time goes.
void trace_summary(const char* label, const run_metadata& md, const std::string& trace_dir) {
  std::map<std::string, std::pair<int, double>> by_op; // "op on device" -> nodes, µs
  int64_t end = 0;
  for (auto& n : md.nodes) {
    bool gpu = n.device.find("gpu:") != std::string::npos;
    auto& e = by_op[n.op + (gpu ? " (gpu)" : " (cpu)")];
    e.first++;
    e.second += double(n.end_ns - n.start_ns) / 1e3;
    end = std::max(end, n.end_ns);
  }
  std::vector<std::pair<double, std::string>> top;
  for (auto& [op, e] : by_op)
    top.push_back({e.second, op + " x" + std::to_string(e.first)});
  std::sort(top.rbegin(), top.rend());
  std::printf("gpu_bench: %s traced: %zu nodes, %.3f ms; busiest:", label, md.nodes.size(),
              double(end) / 1e6);
  for (size_t i = 0; i < top.size() && i < 10; ++i)
    std::printf(" %s %.0f us;", top[i].second.c_str(), top[i].first);
  std::printf("\n");
  if (!trace_dir.empty()) {
    std::string path = trace_dir + "/" + label + ".json";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      std::string json = md.to_chrome_trace();
      std::fwrite(json.data(), 1, json.size(), f);
      std::fclose(f);
    }
  }
}

/// A model's training step for time_steps: its graph, training op and the feeds of step i.
struct step_model {
  graph* g = nullptr;
  operation train;
  std::function<feed_list(int)> feeds;
};

struct step_figures {
  double ms = 0;        ///< per step: the median of 5 rounds
  double peak_mib = 0;  ///< the GPU allocator's peak over the timed steps (variables included)
};

/// Times `steps` training steps (median of 5 rounds) after 20 warm-up ones, reading the GPU's
/// peak memory over them; then traces one step.
step_figures time_steps(runtime& rt, const step_model& m, int steps, const char* label,
                        const std::string& trace_dir) {
  session s(rt, *m.g);
  throw_if_error(s.run({global_variables_initializer(*m.g)}));
  auto step = [&](int i) { throw_if_error(s.run(m.feeds(i), {}, {m.train}).error()); };
  for (int i = 0; i < 20; ++i)
    step(i);
  throw_if_error(rt.reset_gpu_memory_peak(0));
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
      step(i);
    rounds.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        steps);
  }
  std::sort(rounds.begin(), rounds.end());
  double peak = double(rt.gpu_memory(0).value().peak_bytes_in_use) / (1 << 20);
  run_metadata md;
  throw_if_error(s.run(m.feeds(0), {}, {m.train}, {.trace = true}, &md).error());
  trace_summary(label, md, trace_dir);
  return {rounds[2], peak};
}

/// A Fashion-MNIST model's step (apps/train/fashion_mnist_model.cpp, Adam), fed from host
/// memory each step from 8 random batches.
step_figures fashion_step(runtime& rt, const std::string& kind, const char* label,
                          const std::string& trace_dir) {
  auto m = apps::build({.kind = kind, .opt_name = "adam", .lr = 0.001});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0, 1);
  std::vector<tensor> images, labels;
  for (int i = 0; i < 8; ++i) {
    tensor x(dtype::f32, shape{100, 784});
    for (auto& v : x.flat<float>())
      v = pixel(rng);
    tensor y(dtype::i32, shape{100});
    for (auto& v : y.flat<int32_t>())
      v = int32_t(rng() % 10);
    images.push_back(std::move(x));
    labels.push_back(std::move(y));
  }
  step_model sm{&m->g, m->train, [&](int i) {
                  feed_list f{{m->x, images[size_t(i % 8)]}, {m->y, labels[size_t(i % 8)]}};
                  if (m->training.valid())
                    f.push_back({m->training, tensor::scalar(true)});
                  return f;
                }};
  return time_steps(rt, sm, 100, label, trace_dir);
}

/// bench lstm_lm_step's model (bench/lstm_lm_graph.hpp: BlockLSTM layers, full softmax, SGD).
step_figures lm_step(runtime& rt, const char* label, const std::string& trace_dir) {
  bench::lstm_lm_graph m({}, bench::lm_layers::blocks, "lm_");
  step_model sm{&m.g, m.train, [&](int) { return m.feeds; }};
  return time_steps(rt, sm, 20, label, trace_dir);
}

/// The peer's figures for one model (0: none).
struct peer_figures {
  double ms = 0, peak_mib = 0;
};

void step_line(const char* label, step_figures ours, peer_figures torch, double target) {
  if (torch.ms > 0)
    std::printf("bench %s: %.3f ms/step (%.2fx PyTorch's step time, %.3f ms) target <= %.1fx\n",
                label, ours.ms, ours.ms / torch.ms, torch.ms, target);
  else
    std::printf("bench %s: %.3f ms/step (no PyTorch with CUDA here to compare with)\n", label,
                ours.ms);
  if (torch.peak_mib > 0)
    std::printf("bench %s_peak_memory: %.1f MiB (%.2fx PyTorch's max_memory_allocated, %.1f MiB) "
                "target <= 1.1x\n",
                label, ours.peak_mib, ours.peak_mib / torch.peak_mib, torch.peak_mib);
  else
    std::printf("bench %s_peak_memory: %.1f MiB (no PyTorch figure to compare with)\n", label,
                ours.peak_mib);
}

/// The LM step again with RUNNEL_CUDA_GRAPHS=off (BlockLSTM's launches one by one, in a new
/// runtime: a GPU context reads the switch once), and how the graphed step's launches went.
void graphs_off_line(const char* label, double ms, gpu_context::graph_counts before,
                     const std::function<double(runtime&, const char*)>& run_model) {
  auto after = gpu_context::graph_launches();
  setenv("RUNNEL_CUDA_GRAPHS", "off", 1);
  double off_ms;
  {
    runtime off;
    off_ms = run_model(off, (std::string(label) + "_no_graphs").c_str());
  }
  unsetenv("RUNNEL_CUDA_GRAPHS");
  std::printf(
      "gpu_bench: %s with RUNNEL_CUDA_GRAPHS=off: %.3f ms/step; BlockLSTM's launches as "
      "CUDA graphs: %.3f ms (%.2fx; %lld captured, %lld replayed, %lld launched directly)\n",
      label, off_ms, ms, ms / off_ms, (long long)(after.captured - before.captured),
      (long long)(after.replayed - before.replayed), (long long)(after.direct - before.direct));
}

void print_versions(int device) {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, device);
  int driver = 0, rt = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&rt);
  int cublas = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas);
  int cublas_minor = 0, cublas_patch = 0;
  cublasGetProperty(MINOR_VERSION, &cublas_minor);
  cublasGetProperty(PATCH_LEVEL, &cublas_patch);
  std::printf("gpu_bench: %s (sm_%d%d, %d SMs, %.1f GiB); CUDA driver %d.%d, runtime %d.%d; "
              "cuBLAS %d.%d.%d; cuDNN %zu\n",
              p.name, p.major, p.minor, p.multiProcessorCount, double(p.totalGlobalMem) / (1 << 30),
              driver / 1000, driver % 1000 / 10, rt / 1000, rt % 1000 / 10, cublas, cublas_minor,
              cublas_patch, cudnnGetVersion());
}

} // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  reexec_with_better_blas_core(argv); // the CPU ops of a training step use OpenBLAS too
  // Line by line: a later failure must not lose the figures already measured.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  std::map<std::string, peer_figures> torch; // "mlp", "cnn", "lm"
  std::string only, trace_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    // --torch-<model>-ms and --torch-<model>-peak-mib: the peer's step and peak memory
    if (a.rfind("--torch-", 0) == 0 && a.size() > 11 && a.compare(a.size() - 3, 3, "-ms") == 0)
      torch[a.substr(8, a.size() - 11)].ms = std::atof(argv[i + 1]);
    else if (a.rfind("--torch-", 0) == 0 && a.size() > 17 &&
             a.compare(a.size() - 9, 9, "-peak-mib") == 0)
      torch[a.substr(8, a.size() - 17)].peak_mib = std::atof(argv[i + 1]);
    else if (a == "--torch")
      std::printf("gpu_bench: peer %s\n", argv[i + 1]);
    else if (a == "--only")
      only = argv[i + 1];
    else if (a == "--trace-dir")
      trace_dir = argv[i + 1];
    else {
      std::fprintf(stderr, "gpu_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  auto wanted = [&](const char* name) { return only.empty() || std::string(name).find(only) != std::string::npos; };
  auto gpu = gpu_context::create(0);
  if (!gpu.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", gpu.error().to_string().c_str());
    return 2;
  }
  print_versions(0);
  gpu_context& g = **gpu;
  if (wanted("gpu_matmul_f32_4096"))
    matmul_line(g, "gpu_matmul_f32_4096", dtype::f32, false, 4096);
  if (wanted("gpu_matmul_tf32_4096"))
    matmul_line(g, "gpu_matmul_tf32_4096", dtype::f32, true, 4096);
  if (wanted("gpu_matmul_bf16_4096"))
    matmul_line(g, "gpu_matmul_bf16_4096", dtype::bf16, false, 4096);
  if (wanted("gpu_conv2d_3x3_f32"))
    conv_line(g, "gpu_conv2d_3x3_f32", dtype::f32);
  if (wanted("gpu_conv2d_3x3_bf16"))
    conv_line(g, "gpu_conv2d_3x3_bf16", dtype::bf16);
  throw_if_error(g.synchronize());
  gpu->reset(); // the runtime makes its own context
  // A runtime per model: the models' variables share names.
  for (auto [label, kind, target] : {std::tuple{"gpu_mlp_step", "mlp", 0.9},
                                     std::tuple{"gpu_cnn_step", "cnn", 0.9},
                                     std::tuple{"gpu_lstm_lm_step", "lm", 1.0}}) {
    if (!wanted(label))
      continue;
    auto run_model = [&, kind = std::string(kind)](runtime& rt, const char* l) {
      return kind == "lm" ? lm_step(rt, l, trace_dir) : fashion_step(rt, kind, l, trace_dir);
    };
    {
      runtime rt;
      if (rt.gpus().empty()) {
        std::fprintf(stderr, "gpu_bench: the runtime has no GPU: %s\n", rt.no_gpu_reason().c_str());
        return 2;
      }
      auto graphs_before = gpu_context::graph_launches();
      step_figures ours = run_model(rt, label);
      step_line(label, ours, torch[kind], target);
      if (std::string(kind) == "lm")
        graphs_off_line(label, ours.ms, graphs_before,
                        [&](runtime& off, const char* l) { return run_model(off, l).ms; });
      else {
        // The same step with one ApplyAdam node per variable (the multi-tensor pass off): what
        // one launch for all of them saves, in this run.
        setenv("RUNNEL_GRAPH_OPTIMIZER", "no-multi-tensor", 1);
        std::string apart = std::string(label) + "_separate_updates";
        double ms = run_model(rt, apart.c_str()).ms;
        unsetenv("RUNNEL_GRAPH_OPTIMIZER");
        std::printf("gpu_bench: %s with one ApplyAdam per variable (RUNNEL_GRAPH_OPTIMIZER="
                    "no-multi-tensor): %.3f ms/step; one _MultiApplyAdam: %.3f ms (%.2fx)\n",
                    label, ms, ours.ms, ours.ms / ms);
      }
    }
    // The same step with each GPU node waiting for its kernel (RUNNEL_GPU_SYNC_EACH_OP=1, how
    // every node completed before): what completing nodes when enqueued saves.
    setenv("RUNNEL_GPU_SYNC_EACH_OP", "1", 1);
    {
      runtime rt;
      std::string sync_label = std::string(label) + "_sync_each_op";
      std::printf("gpu_bench: %s with RUNNEL_GPU_SYNC_EACH_OP=1: %.3f ms/step\n", label,
                  run_model(rt, sync_label.c_str()).ms);
    }
    unsetenv("RUNNEL_GPU_SYNC_EACH_OP");
  }
  return 0;
}
