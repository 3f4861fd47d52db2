#pragma once
// Conv2D forward through oneDNN when the build has it (RUNNEL_HAVE_DNNL); the im2col + BLAS path
// in conv.cpp is the reference and the fallback. oneDNN types stay in conv_dnnl.cpp.
#include <cstdint>
#include <memory>

#include "runnel/ops/core/status.hpp"

namespace runnel {

/// NHWC input [n,h,w,c], HWIO filter [kh,kw,c,o], output [n,oh,ow,o], leading padding ph/pw.
struct conv_shape {
  int64_t n, h, w, c, kh, kw, o, sh, sw, oh, ow, ph, pw;
};

/// A oneDNN convolution primitive, rebuilt when the shapes change. One per kernel object (the
/// runtime never runs one kernel on two threads at once).
class dnnl_conv {
public:
  dnnl_conv();
  ~dnnl_conv();
  static bool available();
  status run(const conv_shape& s, const float* input, const float* filter, float* output);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace runnel
