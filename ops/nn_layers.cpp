#include "ops/nn_layers.hpp"

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
