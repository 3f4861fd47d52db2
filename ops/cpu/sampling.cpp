// Candidate sampler kernels (TensorFlow's range samplers): draw `num_sampled` classes from a
// distribution over [0, range_max) and report each true and sampled class's expected count in
// the draw, which the sampled losses subtract (as log) from their logits.
//
// With `unique`, draws repeat until num_sampled distinct classes came up after `tries` draws;
// a class of probability p then appears with probability 1 - (1 - p)^tries, computed as
// -expm1(tries · log1p(-p)). Without, its expected count is p · num_sampled.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <unordered_set>

#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

enum class sampler_kind { uniform, log_uniform, unigram };

class candidate_sampler_kernel : public kernel {
public:
  candidate_sampler_kernel(const kernel_construction& c, sampler_kind kind)
      : kind_(kind), num_true_(c.attr<int64_t>("num_true")),
        num_sampled_(c.attr<int64_t>("num_sampled")), unique_(c.attr<bool>("unique")),
        range_(c.attr<int64_t>("range_max")) {
    seed_engine(engine_, c);
    if (kind == sampler_kind::unigram) {
      auto counts = c.attr<std::vector<double>>("unigrams");
      auto reserved = c.attr<int64_t>("num_reserved_ids");
      double distortion = c.attr<double>("distortion");
      if (c.attr<int64_t>("num_shards") != 1)
        init_error_ = unimplemented("FixedUnigramCandidateSampler: num_shards other than 1");
      else if (reserved < 0 || reserved + int64_t(counts.size()) != range_)
        init_error_ = invalid_argument(
            "FixedUnigramCandidateSampler: range_max is " + std::to_string(range_) + " but " +
            std::to_string(reserved) + " reserved ids and " + std::to_string(counts.size()) +
            " unigram counts make " + std::to_string(reserved + int64_t(counts.size())));
      cumulative_.assign(static_cast<size_t>(std::max<int64_t>(reserved, 0)), 0.0);
      double total = 0;
      for (size_t i = 0; i < counts.size() && init_error_.ok(); ++i) {
        if (!(counts[i] >= 0) || !std::isfinite(counts[i]))
          init_error_ = invalid_argument("FixedUnigramCandidateSampler: unigrams[" +
                                         std::to_string(i) + "] = " + std::to_string(counts[i]) +
                                         " is not a finite non-negative count");
        total += std::pow(counts[i], distortion);
        cumulative_.push_back(total);
      }
      if (init_error_.ok() && !(total > 0))
        init_error_ = invalid_argument("FixedUnigramCandidateSampler: every count is zero");
      total_ = total;
    }
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_RETURN_IF_ERROR(init_error_);
    const tensor& truth = ctx.input(0);
    if (truth.rank() != 2 || truth.dim(1) != num_true_)
      return invalid_argument("true_classes must be [batch, " + std::to_string(num_true_) +
                              "], got " + truth.shape().to_string());
    const int64_t* t = truth.data<int64_t>();
    for (int64_t i = 0; i < truth.num_elements(); ++i)
      if (t[i] < 0 || t[i] >= range_)
        return invalid_argument("true class " + std::to_string(t[i]) + " (element " +
                                std::to_string(i) + ") is not in [0, " + std::to_string(range_) +
                                ")");
    tensor& sampled = ctx.allocate_output(0, dtype::i64, shape{num_sampled_});
    int64_t* s = sampled.data<int64_t>();
    int64_t tries = 0;
    {
      std::lock_guard lock(mu_); // steps may run this kernel at once; the draws stay a sequence
      if (unique_) {
        std::unordered_set<int64_t> seen;
        for (int64_t picked = 0; picked < num_sampled_; ++tries) {
          int64_t v = draw();
          if (seen.insert(v).second)
            s[picked++] = v;
        }
      } else {
        for (int64_t i = 0; i < num_sampled_; ++i)
          s[i] = draw();
        tries = num_sampled_;
      }
    }
    auto expected = [&](int64_t cls) {
      double p = probability(cls);
      if (tries == num_sampled_)
        return float(p * double(num_sampled_));
      return float(-std::expm1(double(tries) * std::log1p(-p)));
    };
    tensor& te = ctx.allocate_output(1, dtype::f32, truth.shape());
    for (int64_t i = 0; i < truth.num_elements(); ++i)
      te.data<float>()[i] = expected(t[i]);
    tensor& se = ctx.allocate_output(2, dtype::f32, shape{num_sampled_});
    for (int64_t i = 0; i < num_sampled_; ++i)
      se.data<float>()[i] = expected(s[i]);
    return {};
  }

private:
  int64_t draw() {
    double u = std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
    switch (kind_) {
      case sampler_kind::uniform:
        return std::min(range_ - 1, int64_t(u * double(range_)));
      case sampler_kind::log_uniform:
        return std::min(range_ - 1, int64_t(std::exp(u * std::log1p(double(range_)))) - 1);
      case sampler_kind::unigram:
        break;
    }
    auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u * total_);
    return std::min(range_ - 1, int64_t(it - cumulative_.begin()));
  }

  double probability(int64_t v) const {
    switch (kind_) {
      case sampler_kind::uniform:
        return 1.0 / double(range_);
      case sampler_kind::log_uniform:
        return std::log((double(v) + 2.0) / (double(v) + 1.0)) / std::log1p(double(range_));
      case sampler_kind::unigram:
        break;
    }
    double below = v == 0 ? 0.0 : cumulative_[size_t(v - 1)];
    return (cumulative_[size_t(v)] - below) / total_;
  }

  sampler_kind kind_;
  int64_t num_true_, num_sampled_;
  bool unique_;
  int64_t range_;
  std::vector<double> cumulative_; ///< unigram: running sums of the distorted counts
  double total_ = 0;
  status init_error_;
  std::mutex mu_;
  std::mt19937_64 engine_;
};

kernel_factory sampler_factory(sampler_kind kind) {
  return [kind](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    return std::unique_ptr<kernel>(std::make_unique<candidate_sampler_kernel>(c, kind));
  };
}

} // namespace

RUNNEL_KERNEL_FAMILY(sampling) {
  auto cpu = device_type::cpu;
  reg.add("UniformCandidateSampler", cpu, {}, sampler_factory(sampler_kind::uniform));
  reg.add("LogUniformCandidateSampler", cpu, {}, sampler_factory(sampler_kind::log_uniform));
  reg.add("FixedUnigramCandidateSampler", cpu, {}, sampler_factory(sampler_kind::unigram));
}

} // namespace runnel
