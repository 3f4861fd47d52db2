// Whole-width convolutions as row-shifted matrix products (conv_rows.hpp has the algebra).
#include "runnel/ops/cpu/conv_rows.hpp"

#include <algorithm>
#include <cstring>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {
namespace {

/// Rows of the batch seen as one matrix, and the rows a window can start at.
struct row_view {
  int64_t d;     // floats per input row: w*c
  int64_t total; // input rows: n*h
  int64_t r;     // window starts: total - kh + 1
};

row_view rows_of(const conv_shape& s) {
  int64_t d = s.w * s.c, total = s.n * s.h;
  return {d, total, total - s.kh + 1};
}

/// Items per block for the pool: at least `min_rows`, about 1 MFLOP each.
int64_t grain_for(int64_t flops_per_row, int64_t min_rows) {
  return std::max<int64_t>(min_rows, (int64_t(1) << 20) / std::max<int64_t>(1, flops_per_row));
}

void run(cpu_device* pool, int64_t n, int64_t grain,
         const std::function<void(int64_t, int64_t)>& fn) {
  if (pool && pool->num_threads() > 0 && blas_threads() == 1)
    pool->parallel_for(n, grain, fn);
  else
    fn(0, n);
}

} // namespace

bool conv_is_row_product(const conv_shape& s) {
  return s.kw == s.w && s.pw == 0 && s.ow == 1 && s.sh == 1 && s.ph == 0 &&
         s.oh == s.h - s.kh + 1 && s.n > 0 && s.oh > 0 && s.o > 0;
}

void conv_rows_forward(cpu_device* pool, const conv_shape& s, const float* input,
                       const float* filter, float* output) {
  auto v = rows_of(s);
  tensor full(dtype::f32, shape{v.r * s.o}); // Y for every window start
  float* y = full.data<float>();
  run(pool, v.r, grain_for(2 * s.kh * v.d * s.o, 16), [&](int64_t r0, int64_t r1) {
    for (int64_t i = 0; i < s.kh; ++i)
      parallel_sgemm(nullptr, false, false, r1 - r0, s.o, v.d, 1.f, input + (r0 + i) * v.d, v.d,
                     filter + i * v.d * s.o, s.o, i == 0 ? 0.f : 1.f, y + r0 * s.o, s.o);
    for (int64_t r = r0; r < r1; ++r) // keep the windows inside an image
      if (int64_t b = r / s.h, row = r % s.h; row < s.oh)
        std::memcpy(output + (b * s.oh + row) * s.o, y + r * s.o, size_t(s.o) * sizeof(float));
  });
}

namespace {

/// dy laid out as the full Y: zeros at the window starts that cross into the next image.
tensor full_dy(cpu_device* pool, const conv_shape& s, const row_view& v, const float* dy) {
  tensor full(dtype::f32, shape{v.r * s.o});
  float* f = full.data<float>();
  run(pool, v.r, 4096, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t b = r / s.h, row = r % s.h;
      if (row < s.oh)
        std::memcpy(f + r * s.o, dy + (b * s.oh + row) * s.o, size_t(s.o) * sizeof(float));
      else
        std::memset(f + r * s.o, 0, size_t(s.o) * sizeof(float));
    }
  });
  return full;
}

} // namespace

void conv_rows_backward_input(cpu_device* pool, const conv_shape& s, const float* dy,
                              const float* filter, float* dx) {
  auto v = rows_of(s);
  tensor full = full_dy(pool, s, v, dy);
  const float* g = full.data<float>();
  // dX[t] = sum_i dY[t-i] · W_iᵀ: each block owns its rows of dX.
  run(pool, v.total, grain_for(2 * s.kh * v.d * s.o, 16), [&](int64_t t0, int64_t t1) {
    std::memset(dx + t0 * v.d, 0, size_t((t1 - t0) * v.d) * sizeof(float));
    for (int64_t i = 0; i < s.kh; ++i) {
      int64_t a = std::max<int64_t>(t0 - i, 0), e = std::min(t1 - i, v.r);
      if (a < e)
        parallel_sgemm(nullptr, false, true, e - a, v.d, s.o, 1.f, g + a * s.o, s.o,
                       filter + i * v.d * s.o, s.o, 1.f, dx + (a + i) * v.d, v.d);
    }
  });
}

void conv_rows_backward_filter(cpu_device* pool, const conv_shape& s, const float* input,
                               const float* dy, float* dfilter) {
  auto v = rows_of(s);
  tensor full = full_dy(pool, s, v, dy);
  const float* g = full.data<float>();
  // dW_i = X[i : i+R]ᵀ · dY, each tap's rows split over the pool.
  for (int64_t i = 0; i < s.kh; ++i)
    parallel_sgemm(pool, true, false, v.d, s.o, v.r, 1.f, input + i * v.d, v.d, g, s.o, 0.f,
                   dfilter + i * v.d * s.o, s.o);
}

} // namespace runnel
