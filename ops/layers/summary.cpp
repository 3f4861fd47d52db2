// Builders of the summary ops (ops/defs/summary_ops.cpp); every summary joins the "summaries"
// collection.
#include "runnel/ops/layers/summary.hpp"

#include "runnel/ops/graph/builder.hpp"

namespace runnel {
namespace {

output add_summary(graph& g, std::string_view op, std::string_view name,
                   const std::vector<endpoint>& inputs, attr_map attrs = {}) {
  auto out = g.build(op, name.empty() ? op : name, inputs, std::move(attrs))[0];
  g.add_to_collection("summaries", out.node_id());
  return out;
}

} // namespace

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
  return add_summary(g, "TensorSummaryV2", name.empty() ? tag : name, {t.ep(), text.ep(), m.ep()});
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
