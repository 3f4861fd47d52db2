// Attention: Luong's and Bahdanau's scores against central differences (float64), masking past
// each memory length, and the attention wrapper in dynamic_rnn against the same cell unrolled.
#include <random>

#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/attention.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

double run_scalar(session& s, output y, const feed_list& feeds) {
  auto r = s.run(feeds, {y});
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  return *r.value()[0].data<double>();
}

/// Symbolic gradient of `y` to `x` (fed) against central differences.
void check_gradient(session& s, output y, output x, const tensor& x0, feed_list feeds) {
  auto g = gradients({y}, {x})[0];
  feeds.push_back({x, x0});
  auto r = s.run(feeds, {g});
  REQUIRE(r.ok());
  tensor symbolic = r.value()[0];
  for (int64_t i = 0; i < x0.num_elements(); ++i) {
    double f[2];
    for (int side = 0; side < 2; ++side) {
      tensor xp = x0.copy();
      xp.data<double>()[i] += side ? 1e-6 : -1e-6;
      feeds.back().second = xp;
      f[side] = run_scalar(s, y, feeds);
    }
    INFO("element " << i << " of " << x.name());
    CHECK(symbolic.data<double>()[i] == Approx((f[1] - f[0]) / 2e-6).margin(1e-6).epsilon(1e-5));
  }
}

void check_mechanism(attention_kind kind, const char* name) {
  INFO(name);
  graph g;
  g.set_seed(5);
  const int batch = 2, time = 4, depth = 3, qdepth = 5;
  auto memory = placeholder(g, dtype::f64, shape{batch, time, depth}, "memory");
  auto query = placeholder(g, dtype::f64, shape{batch, qdepth}, "query");
  auto lengths = constant(g, tensor::vector<int32_t>({4, 2}));
  attention_mechanism att(memory, lengths, qdepth,
                          {.kind = kind, .units = 6, .type = dtype::f64, .name = name});
  auto [context, alignments] = att.attend(query);
  auto w1 = constant(g, random_f64({batch, depth}, 7));
  auto w2 = constant(g, random_f64({batch, time}, 8));
  auto y = sum(context * w1) + sum(alignments * w2);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto m0 = random_f64({batch, time, depth}, 1), q0 = random_f64({batch, qdepth}, 2);
  feed_list feeds{{memory, m0}, {query, q0}};
  // Alignments sum to 1 and are zero past each length.
  tensor a = s.run(feeds, {alignments}).value()[0];
  for (int b = 0; b < batch; ++b) {
    double total = 0;
    for (int t = 0; t < time; ++t)
      total += a.data<double>()[b * time + t];
    CHECK(total == Approx(1.0));
  }
  CHECK(a.data<double>()[1 * time + 2] == Approx(0.0).margin(1e-12));
  CHECK(a.data<double>()[1 * time + 3] == Approx(0.0).margin(1e-12));
  check_gradient(s, y, query, q0, {{memory, m0}});
  check_gradient(s, y, memory, m0, {{query, q0}});
  // The weights: through their read values.
  check_gradient(s, y, att.memory_weights.value, s.run({}, {att.memory_weights.value}).value()[0],
                 feeds);
  if (kind == attention_kind::bahdanau)
    check_gradient(s, y, att.score_vector.value, s.run({}, {att.score_vector.value}).value()[0],
                   feeds);
}

} // namespace

TEST_CASE("Luong's and Bahdanau's attention: alignments, masking and gradients",
          "[actors][attention]") {
  check_mechanism(attention_kind::luong, "luong_check");
  check_mechanism(attention_kind::bahdanau, "bahdanau_check");
}

TEST_CASE("the attention wrapper runs in dynamic_rnn as unrolled, gradients included",
          "[actors][attention][rnn]") {
  graph g;
  g.set_seed(9);
  const int batch = 2, src = 3, steps = 4, in = 2, units = 4, att_size = 3;
  auto memory = placeholder(g, dtype::f64, shape{batch, src, units}, "enc");
  auto xs = placeholder(g, dtype::f64, shape{steps, batch, in}, "dec_in");
  auto lengths = constant(g, tensor::vector<int32_t>({4, 3}));
  attention_mechanism att(memory, constant(g, tensor::vector<int32_t>({3, 1})), units,
                          {.type = dtype::f64, .name = "wrap_att"});
  lstm_cell dec(g, in + att_size, units, {.type = dtype::f64, .name = "wrap_dec"});
  attention_wrapper cell(dec, att, att_size, {.type = dtype::f64, .name = "wrap"});
  auto zero = cell.zero_state(constant(g, int32_t(batch)));
  auto dyn = dynamic_rnn(cell, xs, zero, lengths, {.name = "wrap_dyn"});
  auto stat = static_rnn(cell, xs, zero, lengths);
  auto loss = [](const rnn_result& r) { return sum(square(r.outputs)) + sum(r.final_state[1]); };
  std::vector<output> wrt{memory, xs, cell.output_weights.value, att.memory_weights.value,
                          dec.kernel.value};
  auto dg = gradients({loss(dyn)}, wrt);
  auto sg = gradients({loss(stat)}, wrt);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  feed_list feeds{{memory, random_f64({batch, src, units}, 3)},
                  {xs, random_f64({steps, batch, in}, 4)}};
  auto a = s.run(feeds, {dyn.outputs, stat.outputs}).value();
  check_close(a[0], a[1], 1e-12, 1e-12);
  auto d = s.run(feeds, dg).value();
  auto st = s.run(feeds, sg).value();
  for (size_t k = 0; k < d.size(); ++k) {
    INFO("gradient " << k);
    check_close(d[k], st[k], 1e-10, 1e-12);
  }
}
