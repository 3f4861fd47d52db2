#pragma once
// Layers for sequence and text models: dropout with a training switch and sequence masks.
//
//   auto training = placeholder_with_default(g, true);   // or constant(g, true)
//   auto h = dropout(relu(matmul(x, w)), 0.5, training);
//   auto mask = sequence_mask(lengths, max_time);        // [batch, max_time] of 1 / 0

#include "ops/builder.hpp"

namespace runnel {

/// With `training` true: each element kept with probability keep_prob and scaled by
/// 1 / keep_prob, else zero (a fresh mask every run); with `training` false: x unchanged.
/// `training` is a boolean scalar tensor (a placeholder fed per run, or a constant).
output dropout(output x, double keep_prob, output training, int64_t seed = 0,
               std::string_view name = {});
/// Always in training mode.
output dropout(output x, double keep_prob, int64_t seed = 0, std::string_view name = {});

/// [lengths..., maxlen]: 1 where the position is below the length, else 0 (as `t`).
output sequence_mask(output lengths, output maxlen, dtype t = dtype::f32,
                     std::string_view name = {});
output sequence_mask(output lengths, int64_t maxlen, dtype t = dtype::f32,
                     std::string_view name = {});

} // namespace runnel
