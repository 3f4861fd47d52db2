#pragma once
// Layers for sequence and text models: dropout with a training switch and sequence masks.
//
//   auto training = placeholder_with_default(g, true);   // or constant(g, true)
//   auto h = dropout(relu(matmul(x, w)), 0.5, training);
//   auto mask = sequence_mask(lengths, max_time);        // [batch, max_time] of 1 / 0

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

/// With `training` true: each element kept with probability keep_prob and scaled by
/// 1 / keep_prob, else zero (a fresh mask every run); with `training` false: x unchanged.
/// `training` is a boolean scalar tensor (a placeholder fed per run, or a constant).
output dropout(output x, double keep_prob, output training, int64_t seed = 0,
               std::string_view name = {});
/// Always in training mode.
output dropout(output x, double keep_prob, int64_t seed = 0, std::string_view name = {});

struct batch_norm_options {
  double momentum = 0.99; ///< moving = moving · momentum + batch · (1 − momentum)
  double epsilon = 1e-3;
  std::string_view name = "batch_norm";
};
/// Batch normalization over the last axis (channels last, any rank ≥ 2) with TensorFlow's
/// FusedBatchNorm: gamma, beta and non-trainable moving_mean / moving_variance variables under
/// `name`. When `training` (a boolean scalar fed per run) is true it normalises with the batch's
/// statistics and updates the moving averages as part of computing the output (no update ops
/// to remember); when false it uses the moving averages.
struct batch_norm_layer {
  output y;
  graph_variable gamma, beta, moving_mean, moving_variance;
};
batch_norm_layer batch_norm(output x, output training, batch_norm_options o = {});

/// [lengths..., maxlen]: 1 where the position is below the length, else 0 (as `t`).
output sequence_mask(output lengths, output maxlen, dtype t = dtype::f32,
                     std::string_view name = {});
output sequence_mask(output lengths, int64_t maxlen, dtype t = dtype::f32,
                     std::string_view name = {});

} // namespace runnel
