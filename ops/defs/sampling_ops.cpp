// Definitions of TensorFlow's candidate samplers (the sampled losses' negatives), with
// TensorFlow's names, inputs and attributes: UniformCandidateSampler,
// LogUniformCandidateSampler and FixedUnigramCandidateSampler (counts given as `unigrams`; a
// vocabulary file is not read). Kernels: ops/cpu/sampling.cpp; builders:
// ops/layers/sampled_losses.hpp.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

op_def sampler(const char* name) {
  return op_def(name)
      .input("true_classes", dtype::i64)
      .output("sampled_candidates", dtype::i64)
      .output("true_expected_count", dtype::f32)
      .output("sampled_expected_count", dtype::f32)
      .attr("num_true", attr_type::integer)
      .attr("num_sampled", attr_type::integer)
      .attr("unique", attr_type::boolean)
      .attr("range_max", attr_type::integer)
      .attr("seed", attr_type::integer, int64_t(0))
      .attr("seed2", attr_type::integer, int64_t(0))
      .set_stateful()
      .shape_fn([](inference_context& c) -> status {
        int64_t num_true = c.attr<int64_t>("num_true");
        int64_t num_sampled = c.attr<int64_t>("num_sampled");
        int64_t range_max = c.attr<int64_t>("range_max");
        if (num_true < 1 || num_sampled < 1 || range_max < 1)
          return invalid_argument("num_true, num_sampled and range_max must be positive, got " +
                                  std::to_string(num_true) + ", " + std::to_string(num_sampled) +
                                  " and " + std::to_string(range_max));
        if (c.attr<bool>("unique") && num_sampled > range_max)
          return invalid_argument("cannot sample " + std::to_string(num_sampled) +
                                  " unique candidates from a range of " +
                                  std::to_string(range_max));
        auto& t = c.input_shape(0);
        RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 2));
        if (t.has_known_rank() && t[1] >= 0 && t[1] != num_true)
          return c.input_error(0, "has shape " + t.to_string() + " but num_true is " +
                                      std::to_string(num_true));
        c.set_output(0, shape{num_sampled});
        c.set_output(1, t.has_known_rank() ? shape{t[0], num_true} : shape{-1, num_true});
        c.set_output(2, shape{num_sampled});
        return {};
      });
}

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

} // namespace

RUNNEL_OP_FAMILY(sampling) {
  add(reg, sampler("UniformCandidateSampler"));
  add(reg, sampler("LogUniformCandidateSampler"));
  add(reg, sampler("FixedUnigramCandidateSampler")
               .attr("unigrams", attr_type::list_real)
               .attr("distortion", attr_type::real, 1.0)
               .attr("num_reserved_ids", attr_type::integer, int64_t(0))
               .attr("num_shards", attr_type::integer, int64_t(1))
               .attr("shard", attr_type::integer, int64_t(0)));
}

} // namespace runnel
