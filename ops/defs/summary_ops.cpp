// Summary op definitions (TensorFlow's) and their builders; the kernels are in
// storage/tf/summary_kernels.cpp.
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/graph/op_def.hpp"
#include "runnel/ops/layers/summary.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) { throw_if_error(reg.add(std::move(def))); }

const std::vector<dtype> summary_number_types{dtype::f16, dtype::bf16, dtype::f32, dtype::f64,
                                              dtype::i8,  dtype::u8,   dtype::i32, dtype::i64};

output add_summary(graph& g, std::string_view op, std::string_view name,
                   const std::vector<endpoint>& inputs, attr_map attrs = {}) {
  auto out = g.build(op, name.empty() ? op : name, inputs, std::move(attrs))[0];
  g.add_to_collection("summaries", out.node_id());
  return out;
}

} // namespace

void register_summary_ops(op_registry& reg) {
  add(reg, op_def("ScalarSummary")
               .input("tags", dtype::string)
               .input("values", "T")
               .output("summary", dtype::string)
               .type_attr("T", summary_number_types)
               .shape_fn([](inference_context& c) -> status {
                 auto& a = c.input_shape(0);
                 auto& b = c.input_shape(1);
                 if (a.is_fully_defined() && b.is_fully_defined() && a != b)
                   return invalid_argument("tags " + a.to_string() + " and values " +
                                           b.to_string() + " must have the same shape");
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("HistogramSummary")
               .input("tag", dtype::string)
               .input("values", "T")
               .output("summary", dtype::string)
               .type_attr("T", summary_number_types, dtype::f32)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("ImageSummary")
               .input("tag", dtype::string)
               .input("tensor", "T")
               .output("summary", dtype::string)
               .type_attr("T", {dtype::u8, dtype::f16, dtype::f32, dtype::f64}, dtype::f32)
               .attr("max_images", attr_type::integer, int64_t(3))
               .attr("bad_color", attr_type::tensor,
                     tensor::from_values<uint8_t>({4}, {255, 0, 0, 255}))
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 4));
                 auto& s = c.input_shape(1);
                 if (s.has_known_rank() && s[3] >= 0 && s[3] != 1 && s[3] != 3 && s[3] != 4)
                   return c.input_error(1, "must have 1, 3 or 4 channels, not " +
                                               std::to_string(s[3]));
                 if (c.attr<int64_t>("max_images") < 1)
                   return invalid_argument("max_images must be at least 1");
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("TensorSummaryV2")
               .input("tag", dtype::string)
               .input("tensor", "T")
               .input("serialized_summary_metadata", dtype::string)
               .output("summary", dtype::string)
               .type_attr("T")
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(2, 0));
                 c.set_output(0, shape{});
                 return {};
               }));
  add(reg, op_def("MergeSummary")
               .input_list("inputs", dtype::string, "N")
               .output("summary", dtype::string)
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, shape{});
                 return {};
               }));
}

output scalar_summary(std::string_view tag, output value, std::string_view name) {
  graph& g = value.owner();
  std::vector<std::string> tags;
  int64_t n = value.shape().is_fully_defined() ? value.shape().num_elements() : 1;
  if (!value.shape().is_fully_defined())
    throw error(invalid_argument("scalar_summary '" + std::string(tag) + "': the value's shape " +
                                 value.shape().to_string() + " must be fully defined"));
  for (int64_t i = 0; i < n; ++i)
    tags.push_back(i == 0 ? std::string(tag) : std::string(tag) + "_" + std::to_string(i));
  auto tags_t = tensor(dtype::string, value.shape());
  for (int64_t i = 0; i < n; ++i)
    tags_t.flat<std::string>()[size_t(i)] = tags[size_t(i)];
  auto t = constant(g, tags_t, std::string(tag) + "/tags");
  return add_summary(g, "ScalarSummary", name.empty() ? tag : name, {t.ep(), value.ep()});
}

output histogram_summary(std::string_view tag, output values, std::string_view name) {
  graph& g = values.owner();
  auto t = constant(g, tensor::scalar(std::string(tag)), std::string(tag) + "/tag");
  return add_summary(g, "HistogramSummary", name.empty() ? tag : name, {t.ep(), values.ep()});
}

output image_summary(std::string_view tag, output images, int64_t max_images,
                     std::string_view name) {
  graph& g = images.owner();
  auto t = constant(g, tensor::scalar(std::string(tag)), std::string(tag) + "/tag");
  return add_summary(g, "ImageSummary", name.empty() ? tag : name, {t.ep(), images.ep()},
                     {{"max_images", max_images}});
}

output text_summary(std::string_view tag, output text, std::string_view name) {
  graph& g = text.owner();
  auto t = constant(g, tensor::scalar(std::string(tag)), std::string(tag) + "/tag");
  // A serialized SummaryMetadata { plugin_data { plugin_name: "text" } }: field 1 (plugin_data)
  // holding field 1 (plugin_name), both length-delimited.
  std::string metadata = std::string("\x0a\x06\x0a\x04text", 8);
  auto m = constant(g, tensor::scalar(metadata), std::string(tag) + "/metadata");
  return add_summary(g, "TensorSummaryV2", name.empty() ? tag : name,
                     {t.ep(), text.ep(), m.ep()});
}

output merge_summary(const std::vector<output>& summaries, std::string_view name) {
  if (summaries.empty())
    throw error(invalid_argument("merge_summary needs at least one summary"));
  graph& g = summaries[0].owner();
  std::vector<endpoint> in;
  for (auto& s : summaries)
    in.push_back(s.ep());
  return g.build("MergeSummary", name.empty() ? "MergeSummary" : name, in,
                 {{"N", int64_t(in.size())}})[0];
}

output merge_all_summaries(graph& g, std::string_view name) {
  std::vector<output> all;
  for (int id : g.collection("summaries"))
    all.push_back(output(&g, {id, 0}));
  if (all.empty())
    throw error(invalid_argument("merge_all_summaries: the graph has no summary ops"));
  return merge_summary(all, name);
}

} // namespace runnel
