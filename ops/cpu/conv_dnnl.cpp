// Conv2D forward through oneDNN (Debian's libdnnl), when the build found it: a direct
// convolution kernel beats im2col + GEMM on CPUs with wide vectors. Activations stay NHWC;
// the filter is reordered into oneDNN's preferred layout on each call (cheap next to the
// convolution, and the filter changes every training step anyway).
#include "runnel/ops/cpu/conv_dnnl.hpp"

#if RUNNEL_HAVE_DNNL
#include <dnnl.hpp>

#include <mutex>

namespace runnel {

struct dnnl_conv::impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<int64_t> key;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  dnnl::memory::desc user_weights;
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
  dnnl::memory weights;
};

dnnl_conv::dnnl_conv() : impl_(std::make_unique<impl>()) {}
dnnl_conv::~dnnl_conv() = default;

bool dnnl_conv::available() {
  return true;
}

status dnnl_conv::run(const conv_shape& s, const float* input, const float* filter, float* output) {
  using namespace dnnl;
  using tag = memory::format_tag;
  auto& d = *impl_;
  std::vector<int64_t> key{s.n, s.h, s.w, s.c, s.kh, s.kw, s.o, s.sh, s.sw, s.ph, s.pw, s.oh, s.ow};
  try {
    if (key != d.key) {
      memory::dims src{s.n, s.c, s.h, s.w}, wei{s.o, s.c, s.kh, s.kw}, dst{s.n, s.o, s.oh, s.ow};
      memory::dims strides{s.sh, s.sw}, pad_l{s.ph, s.pw};
      memory::dims pad_r{(s.oh - 1) * s.sh + s.kh - s.h - s.ph,
                         (s.ow - 1) * s.sw + s.kw - s.w - s.pw};
      auto src_md = memory::desc(src, memory::data_type::f32, tag::nhwc);
      auto dst_md = memory::desc(dst, memory::data_type::f32, tag::nhwc);
      auto any_wei = memory::desc(wei, memory::data_type::f32, tag::any);
      d.user_weights = memory::desc(wei, memory::data_type::f32, tag::hwio);
      auto desc =
          convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                    src_md, any_wei, dst_md, strides, pad_l, pad_r);
      d.pd = convolution_forward::primitive_desc(desc, d.engine);
      d.prim = convolution_forward(d.pd);
      d.reorder_weights = d.pd.weights_desc() != d.user_weights;
      if (d.reorder_weights) {
        d.weights = memory(d.pd.weights_desc(), d.engine);
        d.weights_reorder = reorder(memory(d.user_weights, d.engine), d.weights);
      }
      d.key = key;
    }
    memory src_mem(d.pd.src_desc(), d.engine, const_cast<float*>(input));
    memory dst_mem(d.pd.dst_desc(), d.engine, output);
    memory user_w(d.user_weights, d.engine, const_cast<float*>(filter));
    memory w = user_w;
    if (d.reorder_weights) {
      d.weights_reorder.execute(d.stream, user_w, d.weights);
      w = d.weights;
    }
    d.prim.execute(d.stream,
                   {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, dst_mem}});
    d.stream.wait();
  } catch (const dnnl::error& e) {
    d.key.clear();
    return internal_error(std::string("oneDNN convolution failed: ") + e.what());
  }
  return {};
}

} // namespace runnel

#else

namespace runnel {
struct dnnl_conv::impl {};
dnnl_conv::dnnl_conv() = default;
dnnl_conv::~dnnl_conv() = default;
bool dnnl_conv::available() {
  return false;
}
status dnnl_conv::run(const conv_shape&, const float*, const float*, float*) {
  return unimplemented("built without oneDNN");
}
} // namespace runnel

#endif
