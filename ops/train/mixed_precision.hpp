#pragma once
// Mixed-precision training: variables keep float32 master weights; the model computes in
// float16 or bfloat16 by casting them where they are read, and the loss is computed in float32.
// Gradients come back through the casts as float32, so optimizers update float32 weights.
//
//   auto w = variable(g, truncated_normal(g, {784, 512}, 0.05), "weights");  // float32
//   auto h = relu(matmul(to_compute(x, dtype::bf16), to_compute(w, dtype::bf16)));
//   auto logits = to_compute(matmul(h, to_compute(w2, dtype::bf16)), dtype::f32);
//   adam_optimizer adam(1e-3);
//   loss_scale_optimizer opt(adam);          // float16: scales the loss so gradients don't
//   auto train = opt.minimize(loss, {}, &step);  // underflow; bfloat16 needs no scaling
//
// Dynamic loss scaling (the default) follows TensorFlow's LossScaleOptimizer: a step whose
// gradients hold an infinity or NaN halves the scale and leaves the weights as they were (its
// gradients are replaced by zeros); `growth_interval` finite steps in a row double it.

#include <memory>

#include "runnel/ops/train/optimizers.hpp"

namespace runnel {

/// `x` cast to `t` when it is a float of another width; unchanged otherwise (integers, or
/// already `t`).
output to_compute(output x, dtype t, std::string_view name = {});

struct loss_scale_options {
  double initial_scale = 32768; ///< 2^15, TensorFlow's default
  bool dynamic = true;          ///< false: the scale stays `initial_scale`
  int64_t growth_interval = 2000;
};

class loss_scale_optimizer {
public:
  explicit loss_scale_optimizer(optimizer& inner, loss_scale_options o = {})
      : inner_(inner), options_(o) {}

  /// The inner optimizer's minimize on `loss` × scale, gradients divided by the scale.
  operation minimize(output loss, std::vector<output> var_list = {},
                     const graph_variable* global_step = nullptr);
  /// The two halves of minimize: gradients of `loss` × scale divided by the scale (zeros when
  /// any is not finite), then the inner update followed by the scale's.
  std::vector<std::pair<gradient_value, output>> compute_gradients(output loss,
                                                                   std::vector<output> var_list = {});
  operation apply_gradients(const std::vector<std::pair<gradient_value, output>>& grads,
                            const graph_variable* global_step = nullptr);
  /// The current loss scale (float32 scalar; valid after minimize).
  output scale() const { return scale_.value; }
  /// Whether this step's gradients were all finite (bool scalar; valid after minimize).
  output gradients_finite() const { return finite_; }

private:
  optimizer& inner_;
  loss_scale_options options_;
  graph_variable scale_, good_steps_;
  output finite_;
};

} // namespace runnel
