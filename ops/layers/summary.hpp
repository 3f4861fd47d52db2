#pragma once
// Summary ops for TensorBoard: each produces a serialized tensorflow.Summary (a string scalar)
// that a summary_writer (storage/tf/events.hpp) appends to an event file with a step.
//
//   auto loss_summary = scalar_summary("loss", loss);
//   auto w_summary = histogram_summary("weights", w.value);
//   auto all = merge_all_summaries(g);            // every summary op in the graph, one string
//   auto out = s.run({...}, {all});               // then writer.add_summary(out[0], step)
//
// The ops are TensorFlow's (ScalarSummary, HistogramSummary, ImageSummary, TensorSummaryV2 and
// MergeSummary), so graphs with them export and import like the others. Their kernels live in
// storage/tf/ (they write protobuf messages). Every summary op joins the "summaries" collection.

#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

/// `value` (a number of any shape; each element is a value named tag, tag_1, ... for more than
/// one) as a scalar summary.
output scalar_summary(std::string_view tag, output value, std::string_view name = {});
/// A histogram of all the values of `values`, with TensorFlow's default exponential buckets.
output histogram_summary(std::string_view tag, output values, std::string_view name = {});
/// Up to `max_images` images of a [batch, height, width, channels] tensor (channels 1, 3 or 4;
/// uint8 as it is, floats scaled to 0..255) as PNG images.
output image_summary(std::string_view tag, output images, int64_t max_images = 3,
                     std::string_view name = {});
/// Strings (any shape) for TensorBoard's text plugin.
output text_summary(std::string_view tag, output text, std::string_view name = {});
/// One summary holding the values of all of `summaries`.
output merge_summary(const std::vector<output>& summaries, std::string_view name = {});
/// merge_summary over the graph's "summaries" collection; an error when it is empty.
output merge_all_summaries(graph& g, std::string_view name = {});

} // namespace runnel
