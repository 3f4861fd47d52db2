// Convolution and pooling op definitions (NHWC): Conv2D and its backprops, MaxPool, AvgPool
// and their gradients.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

/// Shape of a 2-D convolution or pool output from input [N,H,W,C]; `out_channels` < 0 keeps C.
status spatial_shape(inference_context& c, const shape& in, int64_t kh, int64_t kw,
                     int64_t out_channels) {
  if (!in.has_known_rank())
    return {};
  if (in.rank() != 4)
    return c.input_error(0, "must be 4-D (NHWC), got shape " + in.to_string());
  auto strides = c.attr<std::vector<int64_t>>("strides");
  if (strides.size() != 4 || strides[0] != 1 || strides[3] != 1)
    return invalid_argument("strides must be [1, sh, sw, 1], got " + shape(strides).to_string());
  auto padding = c.attr<std::string>("padding");
  auto dim = [&](int64_t size, int64_t k, int64_t s) -> result<int64_t> {
    if (size < 0 || k < 0)
      return int64_t(-1);
    RUNNEL_ASSIGN_OR_RETURN(auto r, conv_output_size(size, k, s, padding));
    return r.first;
  };
  RUNNEL_ASSIGN_OR_RETURN(int64_t oh, dim(in[1], kh, strides[1]));
  RUNNEL_ASSIGN_OR_RETURN(int64_t ow, dim(in[2], kw, strides[2]));
  c.set_output(0, shape{in[0], oh, ow, out_channels < 0 ? in[3] : out_channels});
  return {};
}

op_def& conv_attrs(op_def& d) {
  return d.attr("strides", attr_type::list_int)
      .attr("padding", attr_type::string)
      .attr("data_format", attr_type::string, std::string("NHWC"))
      .attr("dilations", attr_type::list_int, std::vector<int64_t>{1, 1, 1, 1})
      .attr("use_cudnn_on_gpu", attr_type::boolean, true);
}

status check_nhwc(inference_context& c) {
  if (c.attr<std::string>("data_format") != "NHWC")
    return unimplemented("only data_format NHWC is supported");
  if (c.attrs().count("dilations") &&
      c.attr<std::vector<int64_t>>("dilations") != std::vector<int64_t>{1, 1, 1, 1})
    return unimplemented("dilated convolutions are not supported yet");
  return {};
}

op_def pool(const char* name) {
  return op_def(name)
      .attr("ksize", attr_type::list_int)
      .attr("strides", attr_type::list_int)
      .attr("padding", attr_type::string)
      .attr("data_format", attr_type::string, std::string("NHWC"))
      .type_attr("T", {dtype::f16, dtype::bf16, dtype::f32}, dtype::f32);
}

status pool_shape(inference_context& c) {
  RUNNEL_RETURN_IF_ERROR(check_nhwc(c));
  auto k = c.attr<std::vector<int64_t>>("ksize");
  if (k.size() != 4 || k[0] != 1 || k[3] != 1)
    return invalid_argument("ksize must be [1, kh, kw, 1], got " + shape(k).to_string());
  return spatial_shape(c, c.input_shape(0), k[1], k[2], -1);
}

} // namespace

RUNNEL_OP_FAMILY(conv) {
  auto conv = op_def("Conv2D").input("input", "T").input("filter", "T").output("output", "T");
  conv.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(conv).shape_fn([](inference_context& c) -> status {
    RUNNEL_RETURN_IF_ERROR(check_nhwc(c));
    RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 4));
    auto& in = c.input_shape(0);
    auto& f = c.input_shape(1);
    shape fs = f.has_known_rank() ? f : shape::unknown_dims(4);
    if (in.has_known_rank() && in.rank() == 4 && in[3] >= 0 && fs[2] >= 0 && in[3] != fs[2])
      return invalid_argument("input " + in.to_string() + " has " + std::to_string(in[3]) +
                              " channels but the filter " + f.to_string() + " expects " +
                              std::to_string(fs[2]));
    return spatial_shape(c, in, fs[0], fs[1], fs[3]);
  }));
  add(reg, fused_with_bias(reg, "_FusedConv2D", "Conv2D"));
  auto bi = op_def("Conv2DBackpropInput")
                .input("input_sizes", dtype::i32)
                .input("filter", "T")
                .input("out_backprop", "T")
                .output("output", "T");
  bi.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(bi).shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
  auto bf = op_def("Conv2DBackpropFilter")
                .input("input", "T")
                .input("filter_sizes", dtype::i32)
                .input("out_backprop", "T")
                .output("output", "T");
  bf.type_attr("T", {dtype::f16, dtype::bf16, dtype::f32});
  add(reg, conv_attrs(bf).shape_fn([](inference_context& c) { return shape_from_input(c, 1); }));
  for (auto n : {"MaxPool", "AvgPool"})
    add(reg, pool(n).input("input", "T").output("output", "T").shape_fn(pool_shape));
  add(reg, pool("MaxPoolGrad")
               .input("orig_input", "T")
               .input("orig_output", "T")
               .input("grad", "T")
               .output("output", "T")
               .shape_fn(same_shape_as_input(0)));
  add(reg, pool("AvgPoolGrad")
               .input("orig_input_shape", dtype::i32)
               .input("grad", "T")
               .output("output", "T")
               .shape_fn([](inference_context& c) { return shape_from_input(c, 0); }));
}

} // namespace runnel
