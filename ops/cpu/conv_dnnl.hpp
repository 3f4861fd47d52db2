#pragma once
// Conv2D and its two backprops through oneDNN when the build has it (RUNNEL_HAVE_DNNL); the
// im2col + BLAS path in conv.cpp is the reference and the fallback. oneDNN types stay in
// conv_dnnl.cpp.
#include <cstdint>
#include <memory>
#include <string>

#include "runnel/ops/core/status.hpp"

namespace runnel {

/// NHWC input [n,h,w,c], HWIO filter [kh,kw,c,o], output [n,oh,ow,o], leading padding ph/pw.
struct conv_shape {
  int64_t n, h, w, c, kh, kw, o, sh, sw, oh, ow, ph, pw;
};

/// Which product a dnnl_conv computes.
enum class conv_pass {
  forward,         ///< (input, filter) -> output
  backward_input,  ///< (out_backprop, filter) -> input's gradient
  backward_filter, ///< (input, out_backprop) -> filter's gradient (overwritten)
};

/// A oneDNN convolution primitive of one pass, rebuilt when the shapes change, run on the
/// calling thread alone: the kernels split the batch over the device's pool, one dnnl_conv per
/// block (oneDNN's own OpenMP team would compete with the pool and the actors for the cores).
class dnnl_conv {
public:
  explicit dnnl_conv(conv_pass pass = conv_pass::forward);
  ~dnnl_conv();
  dnnl_conv(dnnl_conv&&) noexcept;
  dnnl_conv& operator=(dnnl_conv&&) noexcept;
  static bool available();
  status run(const conv_shape& s, const float* a, const float* b, float* out);
  /// oneDNN's name for the implementation it chose for shape `s` ("jit:avx2", "gemm:jit", ...);
  /// "ref" ones are slower than the im2col path, which the kernels then take instead.
  result<std::string> implementation(const conv_shape& s);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace runnel
