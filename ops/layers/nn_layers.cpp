#include "runnel/ops/layers/nn_layers.hpp"

namespace runnel {

output dropout(output x, double keep_prob, output training, int64_t seed, std::string_view name) {
  graph& g = x.owner();
  if (!(keep_prob > 0 && keep_prob <= 1))
    throw error(invalid_argument("dropout on '" + x.name() + "': keep_prob must be in (0, 1], got " +
                                 std::to_string(keep_prob)));
  if (training.valid() && (training.type() != dtype::boolean || training.shape().rank() > 0))
    throw error(invalid_argument("dropout on '" + x.name() + "': training '" + training.name() +
                                 "' must be a boolean scalar"));
  if (!is_floating(x.type()))
    throw error(invalid_argument("dropout on '" + x.name() + "': x must be floating point, got " +
                                 std::string(runnel::name(x.type()))));
  auto scope = g.name_scope(name.empty() ? "dropout" : name);
  if (keep_prob == 1.0)
    return identity(x);
  dtype t = x.type();
  auto keep = filled(g, t, shape{}, keep_prob, "keep_prob");
  if (training.valid()) // inference: keep everything, scale by one
    keep = select(training, keep, filled(g, t, shape{}, 1.0, "one"), "keep");
  auto [s1, s2] = seeds(g, seed);
  auto noise = g.build("RandomUniform", "uniform", {shape_of(x).ep()},
                       {{"dtype", t}, {"seed", s1}, {"seed2", s2}})[0];
  auto mask = g.build("Floor", "mask", {(noise + keep).ep()})[0];
  return div(x, keep) * mask;
}

output dropout(output x, double keep_prob, int64_t seed, std::string_view name) {
  return dropout(x, keep_prob, output(), seed, name);
}

batch_norm_layer batch_norm(output x, output training, batch_norm_options o) {
  graph& g = x.owner();
  const shape& s = x.shape();
  if (!s.has_known_rank() || s.rank() < 2 || s[s.rank() - 1] < 0)
    throw error(invalid_argument("batch_norm on '" + x.name() + "': x needs rank >= 2 and a " +
                                 "known channel count (last axis), got " + s.to_string()));
  if (training.type() != dtype::boolean || training.shape().rank() > 0)
    throw error(invalid_argument("batch_norm on '" + x.name() + "': training '" +
                                 training.name() + "' must be a boolean scalar"));
  if (!(o.momentum >= 0 && o.momentum < 1) || !(o.epsilon > 0))
    throw error(invalid_argument("batch_norm on '" + x.name() +
                                 "': momentum must be in [0, 1) and epsilon positive"));
  int64_t ch = s[s.rank() - 1];
  auto scope = g.name_scope(o.name);
  batch_norm_layer l;
  l.gamma = variable(g, ones(g, x.type(), shape{ch}), "gamma");
  l.beta = variable(g, zeros(g, x.type(), shape{ch}), "beta");
  l.moving_mean = variable(g, zeros(g, x.type(), shape{ch}), "moving_mean", false);
  l.moving_variance = variable(g, ones(g, x.type(), shape{ch}), "moving_variance", false);
  auto fused = [&](bool is_training, const char* name) {
    return g.build("FusedBatchNorm", name,
                   {x.ep(), l.gamma.value.ep(), l.beta.value.ep(), l.moving_mean.value.ep(),
                    l.moving_variance.value.ep()},
                   {{"epsilon", o.epsilon}, {"is_training", is_training}});
  };
  // Both forms run (inference is one cheap affine pass); the flag picks one, so no cond is
  // needed and the gradient reaches only the form picked.
  auto batch = fused(true, "FusedBatchNorm");
  auto moving = fused(false, "FusedBatchNorm_inference");
  // Moving averages: unchanged when not training.
  auto rate = select(training, filled(g, x.type(), shape{}, 1.0 - o.momentum, "rate"),
                     filled(g, x.type(), shape{}, 0.0, "no_rate"));
  auto update_mean =
      assign_sub(l.moving_mean, (l.moving_mean.value - batch[1]) * rate, "update_moving_mean");
  auto update_var = assign_sub(l.moving_variance, (l.moving_variance.value - batch[2]) * rate,
                               "update_moving_variance");
  auto deps = g.control_dependencies({operation(update_mean), operation(update_var)});
  l.y = identity(select(training, batch[0], moving[0]), "y");
  return l;
}

output sequence_mask(output lengths, output maxlen, dtype t, std::string_view name) {
  graph& g = lengths.owner();
  if (lengths.type() != dtype::i32 && lengths.type() != dtype::i64)
    throw error(invalid_argument("sequence_mask: lengths '" + lengths.name() +
                                 "' must be integer, got " + std::string(runnel::name(lengths.type()))));
  auto scope = g.name_scope(name.empty() ? "SequenceMask" : name);
  auto limit = maxlen.type() == lengths.type() ? maxlen : cast(maxlen, lengths.type());
  auto zero = lengths.type() == dtype::i64 ? constant(g, int64_t(0)) : constant(g, int32_t(0));
  auto step = lengths.type() == dtype::i64 ? constant(g, int64_t(1)) : constant(g, int32_t(1));
  auto positions = range(g, zero, limit, step, "positions");
  auto below = less(positions, expand_dims(lengths, -1));
  return t == dtype::boolean ? below : cast(below, t);
}

output sequence_mask(output lengths, int64_t maxlen, dtype t, std::string_view name) {
  graph& g = lengths.owner();
  auto m = lengths.type() == dtype::i64 ? constant(g, int64_t(maxlen), "maxlen")
                                        : constant(g, int32_t(maxlen), "maxlen");
  return sequence_mask(lengths, m, t, name);
}

} // namespace runnel
