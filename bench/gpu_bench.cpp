// GPU benchmarks (scripts/gpu-check; needs a GPU). Each compares with the library called
// directly on the same device buffers, timed with CUDA events over the same number of runs:
//   gpu_matmul_f32_4096   matmul_cuda vs cublasGemmEx (target >= 0.95x)
//   gpu_matmul_tf32_4096  the same with TF32 tensor cores
//   gpu_matmul_bf16_4096  the same in bfloat16
//   gpu_conv2d_3x3        conv2d_cuda (NHWC, HWIO filter transposed each call) vs
//                         cudnnConvolutionForward with prepared descriptors (target >= 0.9x)
// Not measured yet: an MLP step against PyTorch (no PyTorch peer for the GPU here).
#include <cstdio>
#include <functional>

#include "runnel/ops/cuda/kernels.hpp"

using namespace runnel;

namespace {

/// Milliseconds per call of `f` on the compute stream (CUDA events; 20 calls after a warm-up).
double time_ms(gpu_context& gpu, const std::function<void()>& f) {
  return stream_seconds(gpu.compute(), f, 20) * 1e3;
}

void matmul_line(gpu_context& gpu, const char* label, dtype t, bool tf32, int64_t n) {
  tensor a = gpu.allocate(t, shape{n, n}, "a").value(), b = gpu.allocate(t, shape{n, n}, "b").value();
  cudaMemsetAsync(a.raw_data(), 0, a.bytes(), gpu.compute());
  cudaMemsetAsync(b.raw_data(), 0, b.bytes(), gpu.compute());
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
  std::printf("bench %s: %.1f TFLOP/s (%.2fx cublasGemmEx)\n", label, tflops, direct / ours);
}

void conv_line(gpu_context& gpu) {
  constexpr int n = 32, h = 32, w = 32, c = 64, k = 64;
  tensor x = gpu.allocate(dtype::f32, shape{n, h, w, c}, "x").value();
  tensor f = gpu.allocate(dtype::f32, shape{3, 3, c, k}, "f").value();
  tensor y = gpu.allocate(dtype::f32, shape{n, h, w, k}, "y").value();
  cudaMemsetAsync(x.raw_data(), 0, x.bytes(), gpu.compute());
  cudaMemsetAsync(f.raw_data(), 0, f.bytes(), gpu.compute());
  double ours = time_ms(gpu, [&] {
    tensor out;
    throw_if_error(conv2d_cuda(gpu, x, f, {}, &out, "bench"));
  });
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t fd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&fd);
  cudnnCreateConvolutionDescriptor(&cd);
  cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w);
  cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, k, h, w);
  cudnnSetFilter4dDescriptor(fd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, k, c, 3, 3);
  cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH);
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int returned = 0;
  cudnnGetConvolutionForwardAlgorithm_v7(gpu.cudnn(), xd, fd, cd, yd, 8, &returned, perf);
  tensor ws = gpu.allocate(dtype::u8, shape{int64_t(std::max<size_t>(perf[0].memory, 1))}, "ws").value();
  float one = 1, zero = 0;
  double direct = time_ms(gpu, [&] {
    cudnnConvolutionForward(gpu.cudnn(), &one, xd, x.raw_data(), fd, f.raw_data(), cd, perf[0].algo,
                            ws.raw_data(), perf[0].memory, &zero, yd, y.raw_data());
  });
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(fd);
  cudnnDestroyConvolutionDescriptor(cd);
  double gflops = 2.0 * n * h * w * c * k * 9 / (ours * 1e-3) / 1e9;
  std::printf("bench gpu_conv2d_3x3: %.0f GFLOP/s (%.2fx cudnnConvolutionForward)\n", gflops,
              direct / ours);
}

} // namespace

int main() {
  auto gpu = gpu_context::create(0);
  if (!gpu.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", gpu.error().to_string().c_str());
    return 2;
  }
  matmul_line(**gpu, "gpu_matmul_f32_4096", dtype::f32, false, 4096);
  matmul_line(**gpu, "gpu_matmul_tf32_4096", dtype::f32, true, 4096);
  matmul_line(**gpu, "gpu_matmul_bf16_4096", dtype::bf16, false, 4096);
  conv_line(**gpu);
  throw_if_error((*gpu)->synchronize());
  return 0;
}
