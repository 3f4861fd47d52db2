// Conv2D and its two backprops through oneDNN (Debian's libdnnl), when the build found it: direct
// convolution kernels beat im2col + GEMM on CPUs with wide vectors. Activations stay NHWC (no
// reorders); the filter (or its gradient) is reordered between HWIO and oneDNN's preferred
// layout on each call, cheap next to the convolution, and the filter changes every step anyway.
// Each call runs on its caller's thread alone (conv.cpp splits the batch over the device pool).
#include "runnel/ops/cpu/conv_dnnl.hpp"

#if RUNNEL_HAVE_DNNL
#include <dnnl.hpp>

#include <vector>

// libgomp's API, declared here: compiling with -fopenmp would also switch Eigen to OpenMP.
extern "C" void omp_set_num_threads(int);

namespace runnel {

struct dnnl_conv::impl {
  conv_pass pass;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::vector<int64_t> key;
  dnnl::primitive prim;
  // Each primitive gets a scratchpad of its own: oneDNN's shared one (its default) is not safe
  // with primitives running at once on several threads, as the blocks of a batch do.
  dnnl::memory scratchpad;
  dnnl::memory::desc src_md, dst_md, user_weights;
  std::string name;
  // The filter in oneDNN's layout: filled from the HWIO input (forward, backward_input) or
  // written by the primitive and copied out to HWIO (backward_filter).
  bool reorder_weights = false;
  dnnl::reorder weights_reorder;
  dnnl::memory weights;

  void build(const conv_shape& s) {
    using namespace dnnl;
    using tag = memory::format_tag;
    auto f32 = memory::data_type::f32;
    memory::dims src{s.n, s.c, s.h, s.w}, wei{s.o, s.c, s.kh, s.kw}, dst{s.n, s.o, s.oh, s.ow};
    memory::dims strides{s.sh, s.sw}, pad_l{s.ph, s.pw};
    memory::dims pad_r{(s.oh - 1) * s.sh + s.kh - s.h - s.ph,
                       (s.ow - 1) * s.sw + s.kw - s.w - s.pw};
    src_md = memory::desc(src, f32, tag::nhwc);
    dst_md = memory::desc(dst, f32, tag::nhwc);
    user_weights = memory::desc(wei, f32, tag::hwio);
    auto any_wei = memory::desc(wei, f32, tag::any);
    auto direct = algorithm::convolution_direct;
    memory::desc prim_weights;
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    if (pass == conv_pass::forward) {
      convolution_forward::primitive_desc pd(
          convolution_forward::desc(prop_kind::forward_inference, direct, src_md, any_wei, dst_md,
                                    strides, pad_l, pad_r),
          attr, engine);
      prim = convolution_forward(pd);
      prim_weights = pd.weights_desc();
      name = pd.impl_info_str();
      scratchpad = memory(pd.scratchpad_desc(), engine);
    } else {
      // The backward passes are made against the forward training pass they belong to.
      convolution_forward::primitive_desc hint(
          convolution_forward::desc(prop_kind::forward_training, direct, src_md, any_wei, dst_md,
                                    strides, pad_l, pad_r),
          engine);
      if (pass == conv_pass::backward_input) {
        convolution_backward_data::primitive_desc pd(
            convolution_backward_data::desc(direct, src_md, any_wei, dst_md, strides, pad_l,
                                            pad_r),
            attr, engine, hint);
        prim = convolution_backward_data(pd);
        prim_weights = pd.weights_desc();
        name = pd.impl_info_str();
        scratchpad = memory(pd.scratchpad_desc(), engine);
      } else {
        convolution_backward_weights::primitive_desc pd(
            convolution_backward_weights::desc(direct, src_md, any_wei, dst_md, strides, pad_l,
                                               pad_r),
            attr, engine, hint);
        prim = convolution_backward_weights(pd);
        prim_weights = pd.diff_weights_desc();
        name = pd.impl_info_str();
        scratchpad = memory(pd.scratchpad_desc(), engine);
      }
    }
    reorder_weights = prim_weights != user_weights;
    if (reorder_weights) {
      weights = memory(prim_weights, engine);
      weights_reorder = pass == conv_pass::backward_filter
                            ? reorder(weights, memory(user_weights, engine))
                            : reorder(memory(user_weights, engine), weights);
    }
  }

  void ensure(const conv_shape& s) {
    std::vector<int64_t> k{s.n, s.h, s.w, s.c, s.kh, s.kw, s.o, s.sh, s.sw, s.ph, s.pw, s.oh, s.ow};
    if (k == key)
      return;
    key.clear();
    build(s);
    key = std::move(k);
  }
};

dnnl_conv::dnnl_conv(conv_pass pass) : impl_(std::make_unique<impl>()) { impl_->pass = pass; }
dnnl_conv::~dnnl_conv() = default;
dnnl_conv::dnnl_conv(dnnl_conv&&) noexcept = default;
dnnl_conv& dnnl_conv::operator=(dnnl_conv&&) noexcept = default;

bool dnnl_conv::available() {
  return true;
}

result<std::string> dnnl_conv::implementation(const conv_shape& s) {
  try {
    impl_->ensure(s);
  } catch (const dnnl::error& e) {
    return internal_error(std::string("oneDNN has no convolution for these shapes: ") + e.what());
  }
  return impl_->name;
}

status dnnl_conv::run(const conv_shape& s, const float* a, const float* b, float* out) {
  using namespace dnnl;
  auto& d = *impl_;
  // oneDNN's OpenMP reads the calling thread's setting; a pool thread keeps it.
  omp_set_num_threads(1);
  try {
    d.ensure(s);
    auto in = [&](const memory::desc& md, const float* p) {
      return memory(md, d.engine, const_cast<float*>(p));
    };
    if (d.pass == conv_pass::backward_filter) {
      memory user_dw = in(d.user_weights, out);
      d.prim.execute(d.stream, {{DNNL_ARG_SRC, in(d.src_md, a)},
                                {DNNL_ARG_DIFF_DST, in(d.dst_md, b)},
                                {DNNL_ARG_SCRATCHPAD, d.scratchpad},
                                {DNNL_ARG_DIFF_WEIGHTS, d.reorder_weights ? d.weights : user_dw}});
      if (d.reorder_weights)
        d.weights_reorder.execute(d.stream, d.weights, user_dw);
    } else {
      memory w = in(d.user_weights, b);
      if (d.reorder_weights) {
        d.weights_reorder.execute(d.stream, w, d.weights);
        w = d.weights;
      }
      if (d.pass == conv_pass::forward)
        d.prim.execute(d.stream, {{DNNL_ARG_SRC, in(d.src_md, a)},
                                  {DNNL_ARG_WEIGHTS, w},
                                  {DNNL_ARG_SCRATCHPAD, d.scratchpad},
                                  {DNNL_ARG_DST, in(d.dst_md, out)}});
      else
        d.prim.execute(d.stream, {{DNNL_ARG_DIFF_DST, in(d.dst_md, a)},
                                  {DNNL_ARG_WEIGHTS, w},
                                  {DNNL_ARG_SCRATCHPAD, d.scratchpad},
                                  {DNNL_ARG_DIFF_SRC, in(d.src_md, out)}});
    }
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
dnnl_conv::dnnl_conv(conv_pass) {}
dnnl_conv::~dnnl_conv() = default;
dnnl_conv::dnnl_conv(dnnl_conv&&) noexcept = default;
dnnl_conv& dnnl_conv::operator=(dnnl_conv&&) noexcept = default;
bool dnnl_conv::available() {
  return false;
}
result<std::string> dnnl_conv::implementation(const conv_shape&) {
  return unimplemented("built without oneDNN");
}
status dnnl_conv::run(const conv_shape&, const float*, const float*, float*) {
  return unimplemented("built without oneDNN");
}
} // namespace runnel

#endif
