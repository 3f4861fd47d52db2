// Convolution and pooling, NHWC: Conv2D and its two backprops (oneDNN over blocks of the batch
// where the build has it, im2col + BLAS otherwise and as the reference), MaxPool, AvgPool and
// their gradients.
#include <cblas.h>

#include <algorithm>
#include <limits>

#include "runnel/ops/cpu/conv_dnnl.hpp"
#include "runnel/ops/cpu/conv_rows.hpp"
#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {

namespace {

struct geometry {
  int64_t n, h, w, c;     // input
  int64_t kh, kw, o;      // window, output channels
  int64_t sh, sw;         // strides
  int64_t oh, ow, ph, pw; // output size, leading padding
  int64_t patch() const { return kh * kw * c; }
};

result<std::vector<int64_t>> four_ints(const std::vector<int64_t>& v, const char* what) {
  if (v.size() != 4)
    return invalid_argument(std::string(what) + " must have 4 entries (NHWC)");
  if (v[0] != 1 || v[3] != 1)
    return unimplemented(std::string(what) + " along the batch and channel dimensions must be 1");
  return v;
}

result<geometry> conv_geometry(const shape& in, const shape& filter,
                               const std::vector<int64_t>& strides, const std::string& padding) {
  if (in.rank() != 4 || filter.rank() != 4)
    return invalid_argument("Conv2D needs a 4-D input (NHWC) and a 4-D filter (HWIO), got " +
                            in.to_string() + " and " + filter.to_string());
  if (in[3] != filter[2])
    return invalid_argument("input has " + std::to_string(in[3]) + " channels but the filter " +
                            filter.to_string() + " expects " + std::to_string(filter[2]));
  geometry g{in[0],      in[1],      in[2], in[3], filter[0], filter[1], filter[3],
             strides[1], strides[2], 0,     0,     0,         0};
  RUNNEL_ASSIGN_OR_RETURN(auto hh, conv_output_size(g.h, g.kh, g.sh, padding));
  RUNNEL_ASSIGN_OR_RETURN(auto ww, conv_output_size(g.w, g.kw, g.sw, padding));
  g.oh = hh.first;
  g.ph = hh.second;
  g.ow = ww.first;
  g.pw = ww.second;
  return g;
}

/// Patches of image `b` as rows [oh*ow, kh*kw*c] (zeros where the window leaves the image).
void im2col(const geometry& g, const float* image, float* cols) {
  int64_t k = g.patch();
  for (int64_t y = 0; y < g.oh; ++y)
    for (int64_t x = 0; x < g.ow; ++x) {
      float* row = cols + (y * g.ow + x) * k;
      for (int64_t i = 0; i < g.kh; ++i) {
        int64_t iy = y * g.sh + i - g.ph;
        for (int64_t j = 0; j < g.kw; ++j) {
          int64_t ix = x * g.sw + j - g.pw;
          float* dst = row + (i * g.kw + j) * g.c;
          if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
            std::fill_n(dst, g.c, 0.f);
          else
            std::copy_n(image + (iy * g.w + ix) * g.c, g.c, dst);
        }
      }
    }
}

/// The adjoint of im2col: adds each patch row back into the image.
void col2im(const geometry& g, const float* cols, float* image) {
  int64_t k = g.patch();
  for (int64_t y = 0; y < g.oh; ++y)
    for (int64_t x = 0; x < g.ow; ++x) {
      const float* row = cols + (y * g.ow + x) * k;
      for (int64_t i = 0; i < g.kh; ++i) {
        int64_t iy = y * g.sh + i - g.ph;
        if (iy < 0 || iy >= g.h)
          continue;
        for (int64_t j = 0; j < g.kw; ++j) {
          int64_t ix = x * g.sw + j - g.pw;
          if (ix < 0 || ix >= g.w)
            continue;
          const float* src = row + (i * g.kw + j) * g.c;
          float* dst = image + (iy * g.w + ix) * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch)
            dst[ch] += src[ch];
        }
      }
    }
}

struct conv_attrs {
  std::vector<int64_t> strides;
  std::string padding;
  explicit conv_attrs(const kernel_construction& c)
      : strides(c.attr<std::vector<int64_t>>("strides")), padding(c.attr<std::string>("padding")) {}
};

bool is_pointwise(const geometry& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

conv_shape shape_of(const geometry& g, int64_t n) {
  return {n, g.h, g.w, g.c, g.kh, g.kw, g.o, g.sh, g.sw, g.oh, g.ow, g.ph, g.pw};
}

cpu_device* pool_of(kernel_context& ctx) {
  return ctx.has_cpu() ? &ctx.cpu() : nullptr;
}

/// One pass of a kernel through its fast paths: whole-width windows as row-shifted products
/// (conv_rows.hpp), else oneDNN with the batch split into a block per worker of the device's pool
/// (the caller included), each block a one-threaded oneDNN primitive of its own. Geometries
/// oneDNN has only a reference kernel for stay on the im2col path, as does every geometry when
/// the node asks for the reference.
class fast_paths {
public:
  fast_paths(conv_pass pass, bool reference)
      : pass_(pass), reference_(reference), wanted_(!reference && dnnl_conv::available()) {}

  /// Runs the pass as row products when `g` is a whole-width convolution; false otherwise.
  bool ran_as_rows(kernel_context& ctx, const geometry& g, const float* a, const float* b,
                   float* out) {
    auto s = shape_of(g, g.n);
    if (reference_ || !conv_is_row_product(s))
      return false;
    if (pass_ == conv_pass::forward)
      conv_rows_forward(pool_of(ctx), s, a, b, out);
    else if (pass_ == conv_pass::backward_input)
      conv_rows_backward_input(pool_of(ctx), s, a, b, out);
    else
      conv_rows_backward_filter(pool_of(ctx), s, a, b, out);
    return true;
  }

  /// Whether oneDNN runs `g`: not a 1x1 product (one GEMM), not one oneDNN has only its
  /// reference kernel for (slower than im2col).
  bool takes(const geometry& g) {
    if (!wanted_ || is_pointwise(g))
      return false;
    std::vector<int64_t> key{g.n, g.h, g.w, g.c, g.kh, g.kw, g.o, g.sh, g.sw, g.ph, g.pw};
    if (key != checked_) {
      if (convs_.empty())
        convs_.emplace_back(pass_);
      auto name = convs_[0].implementation(shape_of(g, g.n));
      dnnl_fast_ = name.ok() && name.value().find("ref") == std::string::npos;
      checked_ = key;
    }
    return dnnl_fast_;
  }

  /// forward: (input, filter) -> output; backward_input: (dy, filter) -> dx; backward_filter:
  /// (input, dy) -> dfilter.
  status run(kernel_context& ctx, const geometry& g, const float* a, const float* b, float* out) {
    int64_t workers = ctx.has_cpu() ? ctx.cpu().num_threads() + 1 : 1;
    int64_t blocks = std::min(g.n, workers), per = (g.n + blocks - 1) / blocks;
    blocks = (g.n + per - 1) / per;
    while (int64_t(convs_.size()) < blocks)
      convs_.emplace_back(pass_);
    int64_t in_size = g.h * g.w * g.c, out_size = g.oh * g.ow * g.o, f_size = g.patch() * g.o;
    // The filter's gradient: block 0 writes it, the others partial sums added after.
    tensor partial;
    if (pass_ == conv_pass::backward_filter && blocks > 1)
      partial = tensor(dtype::f32, shape{(blocks - 1) * f_size});
    std::vector<status> results(static_cast<size_t>(blocks));
    auto block = [&](int64_t i) {
      int64_t r0 = i * per, r1 = std::min(g.n, r0 + per);
      auto s = shape_of(g, r1 - r0);
      auto& conv = convs_[size_t(i)];
      if (pass_ == conv_pass::forward)
        return conv.run(s, a + r0 * in_size, b, out + r0 * out_size);
      if (pass_ == conv_pass::backward_input)
        return conv.run(s, a + r0 * out_size, b, out + r0 * in_size);
      return conv.run(s, a + r0 * in_size, b + r0 * out_size,
                      i == 0 ? out : partial.data<float>() + (i - 1) * f_size);
    };
    if (blocks == 1)
      return block(0);
    ctx.cpu().parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        results[size_t(i)] = block(i);
    });
    for (auto& st : results)
      RUNNEL_RETURN_IF_ERROR(st);
    for (int64_t i = 1; i < blocks && pass_ == conv_pass::backward_filter; ++i) {
      const float* p = partial.data<float>() + (i - 1) * f_size;
      for (int64_t j = 0; j < f_size; ++j)
        out[j] += p[j];
    }
    return {};
  }

private:
  conv_pass pass_;
  bool reference_, wanted_;
  std::vector<dnnl_conv> convs_;
  std::vector<int64_t> checked_;
  bool dnnl_fast_ = false; // oneDNN has more than a reference kernel for `checked_`
};

/// Whether a kernel built for node `c` uses the im2col + BLAS reference (internal attribute
/// `_reference`, so tests can hold oneDNN to it).
bool wants_reference(const kernel_construction& c) {
  return c.node.attrs.count("_reference") > 0;
}

class conv2d_kernel : public kernel {
public:
  explicit conv2d_kernel(const kernel_construction& c)
      : a_(c), fast_(conv_pass::forward, wants_reference(c)) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    const tensor& f = ctx.input(1);
    RUNNEL_RETURN_IF_ERROR(four_ints(a_.strides, "strides").error());
    RUNNEL_ASSIGN_OR_RETURN(auto g, conv_geometry(in.shape(), f.shape(), a_.strides, a_.padding));
    tensor& out = ctx.allocate_output(0, dtype::f32, shape{g.n, g.oh, g.ow, g.o});
    int64_t k = g.patch(), rows = g.oh * g.ow;
    if (out.num_elements() == 0)
      return {};
    if (fast_.ran_as_rows(ctx, g, in.data<float>(), f.data<float>(), out.data<float>()))
      return {};
    if (fast_.takes(g))
      return fast_.run(ctx, g, in.data<float>(), f.data<float>(), out.data<float>());
    if (is_pointwise(g)) { // a 1x1 convolution is one matrix product over all pixels
      parallel_sgemm(pool_of(ctx), false, false, g.n * rows, g.o, k, 1.f, in.data<float>(), k,
                     f.data<float>(), g.o, 0.f, out.data<float>(), g.o);
      return {};
    }
    // Several images per GEMM keep BLAS efficient without a patch buffer for the whole batch.
    int64_t per =
        std::max<int64_t>(1, std::min<int64_t>(g.n, (int64_t(8) << 20) / (rows * k * 4 + 1)));
    // The patch buffer comes from the tensor allocator, whose cache recycles large blocks:
    // a fresh buffer per step would pay a page fault per 4 KiB.
    tensor cols_buffer(dtype::f32, shape{per * rows * k});
    float* cols = cols_buffer.data<float>();
    for (int64_t b = 0; b < g.n; b += per) {
      int64_t m = std::min(per, g.n - b);
      ctx.cpu().parallel_for(m, 1, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i)
          im2col(g, in.data<float>() + (b + i) * g.h * g.w * g.c, cols + i * rows * k);
      });
      parallel_sgemm(pool_of(ctx), false, false, m * rows, g.o, k, 1.f, cols, k, f.data<float>(),
                     g.o, 0.f, out.data<float>() + b * rows * g.o, g.o);
    }
    return {};
  }

private:
  conv_attrs a_;
  fast_paths fast_;
};

class conv2d_backprop_input_kernel : public kernel {
public:
  explicit conv2d_backprop_input_kernel(const kernel_construction& c)
      : a_(c), fast_(conv_pass::backward_input, wants_reference(c)) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto sizes, to_int64_vector(ctx.input(0)));
    const tensor& f = ctx.input(1);
    const tensor& dy = ctx.input(2);
    if (sizes.size() != 4)
      return invalid_argument("input_sizes must have 4 entries");
    RUNNEL_ASSIGN_OR_RETURN(auto g, conv_geometry(shape(sizes), f.shape(), a_.strides, a_.padding));
    if (!(dy.shape() == shape{g.n, g.oh, g.ow, g.o}))
      return invalid_argument("out_backprop has shape " + dy.shape().to_string() + ", expected " +
                              shape{g.n, g.oh, g.ow, g.o}.to_string());
    tensor& dx = ctx.allocate_output(0, dtype::f32, shape(sizes));
    int64_t k = g.patch(), rows = g.oh * g.ow;
    if (dx.num_elements() > 0 && dy.num_elements() > 0) {
      if (fast_.ran_as_rows(ctx, g, dy.data<float>(), f.data<float>(), dx.data<float>()))
        return {};
      if (fast_.takes(g))
        return fast_.run(ctx, g, dy.data<float>(), f.data<float>(), dx.data<float>());
    }
    std::fill_n(dx.data<float>(), dx.num_elements(), 0.f);
    if (dx.num_elements() == 0 || dy.num_elements() == 0)
      return {};
    // Images are independent: the pool takes them in chunks, a patch buffer per chunk.
    auto images = [&](int64_t b0, int64_t b1) {
      tensor cols_buffer(dtype::f32, shape{rows * k});
      float* cols = cols_buffer.data<float>();
      for (int64_t b = b0; b < b1; ++b) {
        // d patches = dy · filterᵀ, then scatter the patches back.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(k), int(g.o), 1.f,
                    dy.data<float>() + b * rows * g.o, int(g.o), f.data<float>(), int(g.o), 0.f,
                    cols, int(k));
        col2im(g, cols, dx.data<float>() + b * g.h * g.w * g.c);
      }
    };
    if (ctx.has_cpu() && blas_threads() == 1)
      ctx.cpu().parallel_for(g.n, 1, images);
    else
      images(0, g.n);
    return {};
  }

private:
  conv_attrs a_;
  fast_paths fast_;
};

class conv2d_backprop_filter_kernel : public kernel {
public:
  explicit conv2d_backprop_filter_kernel(const kernel_construction& c)
      : a_(c), fast_(conv_pass::backward_filter, wants_reference(c)) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto sizes, to_int64_vector(ctx.input(1)));
    const tensor& dy = ctx.input(2);
    if (sizes.size() != 4)
      return invalid_argument("filter_sizes must have 4 entries");
    RUNNEL_ASSIGN_OR_RETURN(auto g,
                            conv_geometry(in.shape(), shape(sizes), a_.strides, a_.padding));
    if (!(dy.shape() == shape{g.n, g.oh, g.ow, g.o}))
      return invalid_argument("out_backprop has shape " + dy.shape().to_string() + ", expected " +
                              shape{g.n, g.oh, g.ow, g.o}.to_string());
    tensor& df = ctx.allocate_output(0, dtype::f32, shape(sizes));
    int64_t k = g.patch(), rows = g.oh * g.ow;
    if (df.num_elements() > 0 && rows > 0 && g.n > 0) {
      if (fast_.ran_as_rows(ctx, g, in.data<float>(), dy.data<float>(), df.data<float>()))
        return {};
      if (fast_.takes(g))
        return fast_.run(ctx, g, in.data<float>(), dy.data<float>(), df.data<float>());
    }
    std::fill_n(df.data<float>(), df.num_elements(), 0.f);
    if (df.num_elements() == 0 || rows == 0)
      return {};
    tensor cols_buffer(dtype::f32, shape{rows * k});
    float* cols = cols_buffer.data<float>();
    for (int64_t b = 0; b < g.n; ++b) {
      im2col(g, in.data<float>() + b * g.h * g.w * g.c, cols);
      // d filter += patchesᵀ · dy
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(k), int(g.o), int(rows), 1.f, cols,
                  int(k), dy.data<float>() + b * rows * g.o, int(g.o), 1.f, df.data<float>(),
                  int(g.o));
    }
    return {};
  }

private:
  conv_attrs a_;
  fast_paths fast_;
};

struct pool_attrs {
  std::vector<int64_t> ksize, strides;
  std::string padding;
  explicit pool_attrs(const kernel_construction& c)
      : ksize(c.attr<std::vector<int64_t>>("ksize")),
        strides(c.attr<std::vector<int64_t>>("strides")), padding(c.attr<std::string>("padding")) {}
  result<geometry> of(const shape& in) const {
    RUNNEL_RETURN_IF_ERROR(four_ints(ksize, "ksize").error());
    RUNNEL_RETURN_IF_ERROR(four_ints(strides, "strides").error());
    if (in.rank() != 4)
      return invalid_argument("pooling needs a 4-D input (NHWC), got " + in.to_string());
    return conv_geometry(in, shape{ksize[1], ksize[2], in[3], in[3]}, strides, padding);
  }
};

/// One pooling window: its image, its output's offset, its rows [y0, y1) and columns [x0, x1)
/// clipped to the input.
struct window {
  int64_t b, oi, y0, y1, x0, x1;
};

/// Calls fn(window) per output pixel, the images split over the device's pool: a window reads
/// and (backwards) writes its own image only, so images are independent.
template <class F> void for_each_window(kernel_context& ctx, const geometry& g, F fn) {
  auto images = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t x = 0; x < g.ow; ++x) {
          int64_t y0 = y * g.sh - g.ph, x0 = x * g.sw - g.pw;
          int64_t y1 = std::min(y0 + g.kh, g.h), x1 = std::min(x0 + g.kw, g.w);
          fn(window{b, ((b * g.oh + y) * g.ow + x) * g.c, std::max<int64_t>(y0, 0), y1,
                    std::max<int64_t>(x0, 0), x1});
        }
  };
  int64_t per_image = std::max<int64_t>(1, g.h * g.w * g.c);
  if (ctx.has_cpu())
    ctx.cpu().parallel_for(g.n, std::max<int64_t>(1, 65536 / per_image), images);
  else
    images(0, g.n);
}

class max_pool_kernel : public kernel {
public:
  explicit max_pool_kernel(const kernel_construction& c) : a_(c) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto g, a_.of(in.shape()));
    tensor& out = ctx.allocate_output(0, dtype::f32, shape{g.n, g.oh, g.ow, g.c});
    const float* x = in.data<float>();
    float* o = out.data<float>();
    for_each_window(ctx, g, [&](const window& w) {
      auto [b, oi, y0, y1, x0, x1] = w;
      float* dst = o + oi;
      std::fill_n(dst, g.c, -std::numeric_limits<float>::infinity());
      for (int64_t yy = y0; yy < y1; ++yy)
        for (int64_t xx = x0; xx < x1; ++xx) {
          const float* src = x + ((b * g.h + yy) * g.w + xx) * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch)
            dst[ch] = std::max(dst[ch], src[ch]);
        }
    });
    return {};
  }

private:
  pool_attrs a_;
};

class max_pool_grad_kernel : public kernel {
public:
  explicit max_pool_grad_kernel(const kernel_construction& c) : a_(c) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    const tensor& dy = ctx.input(2);
    RUNNEL_ASSIGN_OR_RETURN(auto g, a_.of(in.shape()));
    if (!(dy.shape() == shape{g.n, g.oh, g.ow, g.c}))
      return invalid_argument("grad has shape " + dy.shape().to_string() + ", expected " +
                              shape{g.n, g.oh, g.ow, g.c}.to_string());
    tensor& dx = ctx.allocate_output(0, dtype::f32, in.shape());
    std::fill_n(dx.data<float>(), dx.num_elements(), 0.f);
    const float* x = in.data<float>();
    for_each_window(ctx, g, [&](const window& w) {
      auto [b, oi, y0, y1, x0, x1] = w;
      for (int64_t ch = 0; ch < g.c; ++ch) {
        int64_t best = -1;
        float best_v = -std::numeric_limits<float>::infinity();
        for (int64_t yy = y0; yy < y1; ++yy)
          for (int64_t xx = x0; xx < x1; ++xx) {
            int64_t idx = ((b * g.h + yy) * g.w + xx) * g.c + ch;
            if (best < 0 || x[idx] > best_v) {
              best = idx;
              best_v = x[idx];
            }
          }
        if (best >= 0)
          dx.data<float>()[best] += dy.data<float>()[oi + ch];
      }
    });
    return {};
  }

private:
  pool_attrs a_;
};

class avg_pool_kernel : public kernel {
public:
  explicit avg_pool_kernel(const kernel_construction& c) : a_(c) {}
  status compute(kernel_context& ctx) override {
    const tensor& in = ctx.input(0);
    RUNNEL_ASSIGN_OR_RETURN(auto g, a_.of(in.shape()));
    tensor& out = ctx.allocate_output(0, dtype::f32, shape{g.n, g.oh, g.ow, g.c});
    const float* x = in.data<float>();
    for_each_window(ctx, g, [&](const window& w) {
      auto [b, oi, y0, y1, x0, x1] = w;
      float* dst = out.data<float>() + oi;
      std::fill_n(dst, g.c, 0.f);
      for (int64_t yy = y0; yy < y1; ++yy)
        for (int64_t xx = x0; xx < x1; ++xx) {
          const float* src = x + ((b * g.h + yy) * g.w + xx) * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch)
            dst[ch] += src[ch];
        }
      float count = float((y1 - y0) * (x1 - x0)); // padding is not counted, as in TensorFlow
      for (int64_t ch = 0; ch < g.c; ++ch)
        dst[ch] /= count;
    });
    return {};
  }

private:
  pool_attrs a_;
};

class avg_pool_grad_kernel : public kernel {
public:
  explicit avg_pool_grad_kernel(const kernel_construction& c) : a_(c) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto sizes, to_int64_vector(ctx.input(0)));
    const tensor& dy = ctx.input(1);
    RUNNEL_ASSIGN_OR_RETURN(auto g, a_.of(shape(sizes)));
    if (!(dy.shape() == shape{g.n, g.oh, g.ow, g.c}))
      return invalid_argument("grad has shape " + dy.shape().to_string() + ", expected " +
                              shape{g.n, g.oh, g.ow, g.c}.to_string());
    tensor& dx = ctx.allocate_output(0, dtype::f32, shape(sizes));
    std::fill_n(dx.data<float>(), dx.num_elements(), 0.f);
    for_each_window(ctx, g, [&](const window& w) {
      auto [b, oi, y0, y1, x0, x1] = w;
      float count = float((y1 - y0) * (x1 - x0));
      for (int64_t yy = y0; yy < y1; ++yy)
        for (int64_t xx = x0; xx < x1; ++xx) {
          float* dst = dx.data<float>() + ((b * g.h + yy) * g.w + xx) * g.c;
          for (int64_t ch = 0; ch < g.c; ++ch)
            dst[ch] += dy.data<float>()[oi + ch] / count;
        }
    });
    return {};
  }

private:
  pool_attrs a_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(conv) {
  auto cpu = device_type::cpu;
  const std::vector<dtype> f32{dtype::f32};
  reg.add("Conv2D", cpu, f32, make_kernel<conv2d_kernel>);
  reg.add("Conv2DBackpropInput", cpu, f32, make_kernel<conv2d_backprop_input_kernel>);
  reg.add("Conv2DBackpropFilter", cpu, f32, make_kernel<conv2d_backprop_filter_kernel>);
  reg.add("MaxPool", cpu, f32, make_kernel<max_pool_kernel>);
  reg.add("MaxPoolGrad", cpu, f32, make_kernel<max_pool_grad_kernel>);
  reg.add("AvgPool", cpu, f32, make_kernel<avg_pool_kernel>);
  reg.add("AvgPoolGrad", cpu, f32, make_kernel<avg_pool_grad_kernel>);
}

} // namespace runnel
