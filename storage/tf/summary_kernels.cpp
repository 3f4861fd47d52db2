// Kernels of the summary ops (ops/defs/summary_ops.cpp): each writes a serialized tensorflow.Summary.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>

#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/storage/tf/events.hpp"
#include "runnel/storage/tf/png.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {
namespace {

tensor summary_output(const tensorflow::Summary& s) {
  std::string bytes;
  s.SerializeToString(&bytes);
  return tensor::scalar(std::move(bytes));
}

class scalar_summary_kernel : public kernel {
public:
  explicit scalar_summary_kernel(const kernel_construction&) {}
  status compute(kernel_context& ctx) override {
    const tensor& tags = ctx.input(0);
    const tensor& values = ctx.input(1);
    if (tags.shape() != values.shape())
      return invalid_argument("ScalarSummary: tags " + tags.shape().to_string() + " and values " +
                              values.shape().to_string() + " must have the same shape");
    tensorflow::Summary s;
    for (int64_t i = 0; i < values.num_elements(); ++i) {
      auto* v = s.add_value();
      v->set_tag(tags.flat<std::string>()[size_t(i)]);
      v->set_simple_value(float(element_as_double(values, i)));
    }
    ctx.set_output(0, summary_output(s));
    return {};
  }
};

/// TensorFlow's default histogram bucket limits: ±1e-12 · 1.1^k up to 1e20, 0, and ±DBL_MAX.
const std::vector<double>& default_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1)
      pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it)
      all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

class histogram_summary_kernel : public kernel {
public:
  explicit histogram_summary_kernel(const kernel_construction&) {}
  status compute(kernel_context& ctx) override {
    const tensor& values = ctx.input(1);
    auto& limits = default_limits();
    std::vector<double> counts(limits.size(), 0.0);
    double lo = DBL_MAX, hi = -DBL_MAX, sum = 0, sq = 0;
    int64_t n = values.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      double v = element_as_double(values, i);
      if (!std::isfinite(v))
        return invalid_argument("HistogramSummary '" + ctx.input(0).flat<std::string>()[0] +
                                "': value " + std::to_string(i) + " is " +
                                (std::isnan(v) ? "NaN" : "infinite"));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
      sq += v * v;
      size_t b = size_t(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
      counts[std::min(b, limits.size() - 1)] += 1;
    }
    tensorflow::Summary s;
    auto* v = s.add_value();
    v->set_tag(ctx.input(0).flat<std::string>()[0]);
    auto* h = v->mutable_histo();
    h->set_min(n ? lo : 0);
    h->set_max(n ? hi : 0);
    h->set_num(double(n));
    h->set_sum(sum);
    h->set_sum_squares(sq);
    // As TensorFlow encodes it: a run of empty buckets collapses into its last one.
    for (size_t i = 0; i < limits.size(); ++i) {
      if (counts[i] == 0 && i > 0 && counts[i - 1] == 0 && h->bucket_size() > 0) {
        h->set_bucket_limit(h->bucket_limit_size() - 1, limits[i]);
        continue;
      }
      h->add_bucket_limit(limits[i]);
      h->add_bucket(counts[i]);
    }
    ctx.set_output(0, summary_output(s));
    return {};
  }
};

class image_summary_kernel : public kernel {
public:
  explicit image_summary_kernel(const kernel_construction& c)
      : max_images_(c.attr<int64_t>("max_images")) {}
  status compute(kernel_context& ctx) override {
    const std::string& tag = ctx.input(0).flat<std::string>()[0];
    const tensor& t = ctx.input(1);
    int64_t batch = t.dim(0), h = t.dim(1), w = t.dim(2), c = t.dim(3);
    if (c != 1 && c != 3 && c != 4)
      return invalid_argument("ImageSummary '" + tag + "': " + std::to_string(c) +
                              " channels (1, 3 or 4)");
    if (h < 1 || w < 1 || h > (1 << 15) || w > (1 << 15))
      return invalid_argument("ImageSummary '" + tag + "': images of " + std::to_string(h) + "x" +
                              std::to_string(w) + " cannot be encoded");
    int64_t per = h * w * c;
    tensorflow::Summary s;
    std::vector<uint8_t> pixels(static_cast<size_t>(per));
    for (int64_t b = 0; b < std::min(batch, max_images_); ++b) {
      if (t.type() == dtype::u8) {
        std::copy_n(t.data<uint8_t>() + b * per, per, pixels.begin());
      } else {
        // Floats: non-negative images scale so their maximum is 255; others so that 0 is 128
        // and the largest magnitude reaches the end of the range (TensorFlow's rule).
        double lo = DBL_MAX, hi = -DBL_MAX;
        for (int64_t i = 0; i < per; ++i) {
          double v = element_as_double(t, b * per + i);
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
        bool positive = lo >= 0;
        double scale = positive ? (hi > 0 ? 255.0 / hi : 0.0)
                                : 127.0 / std::max(std::abs(lo), std::abs(hi));
        double offset = positive ? 0.0 : 128.0;
        for (int64_t i = 0; i < per; ++i) {
          double v = element_as_double(t, b * per + i) * scale + offset;
          pixels[size_t(i)] = uint8_t(std::clamp(std::lround(v), 0L, 255L));
        }
      }
      auto* v = s.add_value();
      v->set_tag(batch == 1 || max_images_ == 1 ? tag + "/image"
                                                : tag + "/image/" + std::to_string(b));
      auto* img = v->mutable_image();
      img->set_height(int32_t(h));
      img->set_width(int32_t(w));
      img->set_colorspace(int32_t(c));
      img->set_encoded_image_string(tf::encode_png(pixels.data(), h, w, int(c)));
    }
    ctx.set_output(0, summary_output(s));
    return {};
  }

private:
  int64_t max_images_;
};

class tensor_summary_kernel : public kernel {
public:
  explicit tensor_summary_kernel(const kernel_construction&) {}
  status compute(kernel_context& ctx) override {
    tensorflow::Summary s;
    auto* v = s.add_value();
    v->set_tag(ctx.input(0).flat<std::string>()[0]);
    if (!v->mutable_metadata()->ParseFromString(ctx.input(2).flat<std::string>()[0]))
      return invalid_argument("TensorSummaryV2 '" + v->tag() +
                              "': serialized_summary_metadata is not a SummaryMetadata");
    tf::to_proto(ctx.input(1), v->mutable_tensor());
    ctx.set_output(0, summary_output(s));
    return {};
  }
};

class merge_summary_kernel : public kernel {
public:
  explicit merge_summary_kernel(const kernel_construction&) {}
  status compute(kernel_context& ctx) override {
    tensorflow::Summary merged;
    std::set<std::string> tags;
    for (int i = 0; i < ctx.num_inputs(); ++i)
      for (auto& bytes : ctx.input(i).flat<std::string>()) {
        tensorflow::Summary s;
        if (!s.ParseFromString(bytes))
          return invalid_argument("MergeSummary: input " + std::to_string(i) +
                                  " is not a serialized Summary");
        for (auto& v : s.value()) {
          if (!tags.insert(v.tag()).second)
            return invalid_argument("MergeSummary: two summaries have the tag '" + v.tag() + "'");
          *merged.add_value() = v;
        }
      }
    ctx.set_output(0, summary_output(merged));
    return {};
  }
};

} // namespace

void register_summary_kernels(kernel_registry& reg) {
  auto cpu = device_type::cpu;
  reg.add("ScalarSummary", cpu, {}, make_kernel<scalar_summary_kernel>);
  reg.add("HistogramSummary", cpu, {}, make_kernel<histogram_summary_kernel>);
  reg.add("ImageSummary", cpu, {}, make_kernel<image_summary_kernel>);
  reg.add("TensorSummaryV2", cpu, {}, make_kernel<tensor_summary_kernel>);
  reg.add("MergeSummary", cpu, {}, make_kernel<merge_summary_kernel>);
}

} // namespace runnel
