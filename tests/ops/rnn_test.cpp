// Cells and dynamic_rnn: the loop against the same cell unrolled, sequence lengths (zeros past a
// length, the state carried), gradients, and an LSTM that learns.
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/layers/rnn.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor uniform_f64(const shape& s, uint32_t seed) {
  tensor t(dtype::f64, s);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t.flat<double>()) {
    x = x * 1664525u + 1013904223u;
    v = double(x >> 8) / double(1u << 24) * 2.0 - 1.0;
  }
  return t;
}

template <class Cell> void compare_with_unrolled(const char* which) {
  INFO(which);
  graph g;
  g.set_seed(3);
  const int steps = 6, batch = 3, in = 4, units = 5;
  Cell cell(g, in, units, {.type = dtype::f64});
  auto xs = placeholder(g, dtype::f64, shape{steps, batch, in}, "xs");
  auto lengths = placeholder(g, dtype::i32, shape{batch}, "lengths");
  auto zero = cell.zero_state(constant(g, int32_t(batch)));
  auto dyn = dynamic_rnn(cell, xs, zero, lengths);
  auto stat = static_rnn(cell, xs, zero, lengths);
  auto loss = [](const rnn_result& r) {
    output l = sum(square(r.outputs));
    for (auto& s : r.final_state)
      l = l + sum(s);
    return l;
  };
  std::vector<output> xs_and_weights{xs, cell.kernel.value, cell.bias.value};
  auto dg = gradients({loss(dyn)}, xs_and_weights);
  auto sg = gradients({loss(stat)}, xs_and_weights);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto x0 = uniform_f64({steps, batch, in}, 1);
  feed_list feeds{{xs, x0}, {lengths, tensor::vector<int32_t>({6, 2, 0})}};
  std::vector<output> fetch{dyn.outputs, stat.outputs};
  for (size_t k = 0; k < dyn.final_state.size(); ++k) {
    fetch.push_back(dyn.final_state[k]);
    fetch.push_back(stat.final_state[k]);
  }
  std::vector<tensor> r = s.run(feeds, fetch).value();
  for (size_t k = 0; k < r.size(); k += 2)
    check_close(r[k], r[k + 1], 1e-12, 1e-12);
  // Past each example's length the outputs are exactly zero.
  std::span<double> out = r[0].flat<double>();
  for (int t = 0; t < steps; ++t)
    for (int b = 0; b < batch; ++b)
      for (int u = 0; u < units; ++u)
        if (t >= std::vector<int>{6, 2, 0}[size_t(b)])
          CHECK(out[size_t((t * batch + b) * units + u)] == 0.0);
  // The final state of the example of length 2 is the state after its first two steps: run
  // on two steps only, without lengths.
  auto two = strided_slice(xs, {0}, {2}, {1});
  auto short_run = dynamic_rnn(cell, two, zero, {}, {.name = "short"});
  tensor full = s.run(feeds, {dyn.final_state.back()}).value()[0];
  tensor cut = s.run(feeds, {short_run.final_state.back()}).value()[0];
  for (int u = 0; u < units; ++u)
    CHECK(full.flat<double>()[size_t(units + u)] ==
          Approx(cut.flat<double>()[size_t(units + u)]).epsilon(1e-12));
  // The example of length 0 keeps its initial (zero) state.
  for (int u = 0; u < units; ++u)
    CHECK(full.flat<double>()[size_t(2 * units + u)] == 0.0);
  std::vector<tensor> d = s.run(feeds, dg).value();
  std::vector<tensor> st = s.run(feeds, sg).value();
  for (size_t k = 0; k < d.size(); ++k) {
    INFO("gradient " << k);
    check_close(d[k], st[k], 1e-10, 1e-12);
  }
}

} // namespace

TEST_CASE("dynamic_rnn with a basic cell matches the unrolled network, lengths and gradients",
          "[actors][rnn]") {
  compare_with_unrolled<basic_rnn_cell>("basic_rnn_cell");
}

TEST_CASE("dynamic_rnn with an LSTM cell matches the unrolled network, lengths and gradients",
          "[actors][rnn]") {
  compare_with_unrolled<lstm_cell>("lstm_cell");
}

TEST_CASE("an LSTM trained through dynamic_rnn learns to sum a sequence", "[actors][rnn]") {
  graph g;
  g.set_seed(7);
  const int steps = 5, batch = 16;
  lstm_cell cell(g, 1, 8, {.name = "sum_lstm"}); // variables are runtime-wide: a name of its own
  auto xs = placeholder(g, dtype::f32, shape{steps, batch, 1}, "xs");
  auto r = dynamic_rnn(cell, xs, cell.zero_state(constant(g, int32_t(batch))));
  auto w = variable(g, random_normal(g, {8, 1}, 0.3, dtype::f32, 1), "readout");
  auto prediction = matmul(r.final_state[1], w.value);
  auto target = reshape(sum(xs, {0}), std::vector<int64_t>{batch, 1});
  auto loss = mean(square(prediction - target));
  adam_optimizer opt(0.05);
  auto train = opt.minimize(loss);
  auto init = global_variables_initializer(g);
  session s(test_runtime(), g);
  auto st = s.run({init});
  INFO(st.to_string());
  REQUIRE(st.ok());
  tensor x(dtype::f32, shape{steps, batch, 1});
  uint32_t seed = 11;
  for (auto& v : x.flat<float>()) {
    seed = seed * 1664525u + 1013904223u;
    v = float(seed >> 8) / float(1u << 24) - 0.5f;
  }
  feed_list feeds{{xs, x}};
  float first = *s.run(feeds, {loss}).value()[0].data<float>();
  for (int i = 0; i < 200; ++i)
    REQUIRE(s.run(feeds, {}, {train}).ok());
  float last = *s.run(feeds, {loss}).value()[0].data<float>();
  INFO("loss " << first << " -> " << last);
  CHECK(last < first * 0.1f);
}

TEST_CASE("a GRU and a two-layer stack run in dynamic_rnn as unrolled, with gradients",
          "[actors][rnn]") {
  graph g;
  g.set_seed(5);
  const int steps = 4, batch = 3, in = 3, units = 4;
  gru_cell gru(g, in, units, {.type = dtype::f64, .name = "gru_test"});
  lstm_cell lower(g, in, units, {.type = dtype::f64, .name = "stack_lower"});
  gru_cell upper(g, units, units, {.type = dtype::f64, .name = "stack_upper"});
  multi_rnn_cell stack({&lower, &upper});
  CHECK(stack.state_sizes() == std::vector<int64_t>{units, units, units});
  auto xs = placeholder(g, dtype::f64, shape{steps, batch, in}, "xs");
  auto lengths = constant(g, {int32_t(4), int32_t(1), int32_t(3)});
  auto n = constant(g, int32_t(batch));
  for (rnn_cell* cell : std::vector<rnn_cell*>{&gru, &stack}) {
    auto dyn = dynamic_rnn(*cell, xs, cell->zero_state(n), lengths);
    auto stat = static_rnn(*cell, xs, cell->zero_state(n), lengths);
    auto dg = gradients({sum(square(dyn.outputs))}, {xs})[0];
    auto sg = gradients({sum(square(stat.outputs))}, {xs})[0];
    feed_list feeds{{xs, uniform_f64({steps, batch, in}, 4)}};
    session s(test_runtime(), g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    auto r = s.run(feeds, {dyn.outputs, stat.outputs, dyn.final_state.back(),
                           stat.final_state.back(), dg, sg})
                 .value();
    for (size_t k = 0; k < r.size(); k += 2)
      check_close(r[k], r[k + 1], 1e-10, 1e-12);
  }
}

TEST_CASE("reverse_sequence reverses each example up to its length", "[actors][rnn]") {
  graph g;
  auto x = constant(g, tensor::from_values<float>(shape{3, 2, 1}, {1, 10, 2, 20, 3, 30}));
  auto r = reverse_sequence(x, constant(g, {int32_t(3), int32_t(2)}));
  check_equal(eval1(r), tensor::from_values<float>(shape{3, 2, 1}, {3, 20, 2, 10, 1, 30}));
}

TEST_CASE("bidirectional_dynamic_rnn reads each sequence backwards up to its length",
          "[actors][rnn]") {
  graph g;
  g.set_seed(8);
  const int steps = 5, batch = 2, in = 2, units = 3;
  basic_rnn_cell fw(g, in, units, {.type = dtype::f64, .name = "bi_fw"});
  basic_rnn_cell bw(g, in, units, {.type = dtype::f64, .name = "bi_bw"});
  auto xs = placeholder(g, dtype::f64, shape{steps, batch, in}, "xs");
  auto lengths = constant(g, {int32_t(5), int32_t(3)});
  auto n = constant(g, int32_t(batch));
  auto bi = bidirectional_dynamic_rnn(fw, bw, xs, fw.zero_state(n), bw.zero_state(n), lengths);
  // The backward output at an example's last step is the bw cell's first step on that input.
  auto x0 = uniform_f64({steps, batch, in}, 9);
  auto at = [&](int t, int b) {
    std::vector<double> v;
    for (int k = 0; k < in; ++k)
      v.push_back(x0.flat<double>()[size_t((t * batch + b) * in + k)]);
    return tensor::from_values<double>(shape{1, in}, v);
  };
  auto one = placeholder(g, dtype::f64, shape{1, in}, "one");
  auto first_step = bw.step(one, bw.zero_state(constant(g, int32_t(1)))).first;
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto r = s.run({{xs, x0}}, {bi.backward_outputs, bi.forward_outputs}).value();
  auto expect_b1 = s.run({{one, at(2, 1)}}, {first_step}).value()[0]; // example 1, t = 2
  auto expect_b0 = s.run({{one, at(4, 0)}}, {first_step}).value()[0]; // example 0, t = 4
  for (int u = 0; u < units; ++u) {
    CHECK(r[0].flat<double>()[size_t((2 * batch + 1) * units + u)] ==
          Approx(expect_b1.flat<double>()[size_t(u)]).epsilon(1e-12));
    CHECK(r[0].flat<double>()[size_t((4 * batch + 0) * units + u)] ==
          Approx(expect_b0.flat<double>()[size_t(u)]).epsilon(1e-12));
    for (int t = 3; t < steps; ++t) { // past example 1's length: zeros both ways
      CHECK(r[0].flat<double>()[size_t((t * batch + 1) * units + u)] == 0.0);
      CHECK(r[1].flat<double>()[size_t((t * batch + 1) * units + u)] == 0.0);
    }
  }
}

TEST_CASE("the fused LSTM cell matches the unfused one in dynamic_rnn, outputs and gradients",
          "[actors][rnn][lstm]") {
  graph g;
  const int steps = 7, batch = 4, in = 6, units = 9;
  // Equal seeds: equal initial weights in the two cells' own variables.
  lstm_cell plain(g, in, units, {.name = "plain_lstm", .seed = 21});
  lstm_cell fused(g, in, units, {.name = "fused_lstm", .seed = 21, .fused = true});
  auto xs = placeholder(g, dtype::f32, shape{steps, batch, in}, "xs");
  auto lengths = placeholder(g, dtype::i32, shape{batch}, "lengths");
  auto zero = plain.zero_state(constant(g, int32_t(batch)));
  auto a = dynamic_rnn(plain, xs, zero, lengths, {.name = "plain_rnn"});
  auto b = dynamic_rnn(fused, xs, zero, lengths, {.name = "fused_rnn"});
  auto loss = [](const rnn_result& r) { return sum(square(r.outputs)) + sum(r.final_state[0]); };
  auto ga = gradients({loss(a)}, {xs, plain.kernel.value, plain.bias.value});
  auto gb = gradients({loss(b)}, {xs, fused.kernel.value, fused.bias.value});
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  tensor x = uniform_f64({steps, batch, in}, 4);
  graph cg;
  feed_list feeds{{xs, eval1(cast(constant(cg, x), dtype::f32))},
                  {lengths, tensor::vector<int32_t>({7, 3, 0, 5})}};
  std::vector<output> fa{a.outputs, a.final_state[0], a.final_state[1]};
  std::vector<output> fb{b.outputs, b.final_state[0], b.final_state[1]};
  fa.insert(fa.end(), ga.begin(), ga.end());
  fb.insert(fb.end(), gb.begin(), gb.end());
  auto ra = s.run(feeds, fa).value(), rb = s.run(feeds, fb).value();
  for (size_t k = 0; k < ra.size(); ++k) {
    INFO("fetch " << k);
    check_close(rb[k], ra[k], 1e-5, 1e-6);
  }
}

TEST_CASE("LSTMBlockCell with peepholes matches the same cell built from ops, gradients included",
          "[actors][rnn][lstm]") {
  graph g;
  const int batch = 5, in = 4, units = 6;
  auto f32 = [&](shape sh, uint32_t seed, double scale) {
    return cast(constant(g, uniform_f64(sh, seed)) * scale, dtype::f32);
  };
  auto x = f32({batch, in}, 1, 1.0), c = f32({batch, units}, 2, 1.0), h = f32({batch, units}, 3, 1.0);
  auto w = f32({in + units, 4 * units}, 4, 0.4), bias = f32({4 * units}, 5, 0.5);
  auto wci = f32({units}, 6, 0.5), wcf = f32({units}, 7, 0.5), wco = f32({units}, 8, 0.5);
  const double forget_bias = 0.7;
  auto fused = lstm_block_cell(x, c, h, w, bias,
                               {.forget_bias = forget_bias, .cell_clip = -1, .use_peephole = true},
                               wci, wcf, wco);
  auto parts = split(matmul(concat({x, h}, 1), w) + bias, 4, 1);
  auto i = sigmoid(parts[0] + c * wci);
  auto ci = tanh(parts[1]);
  auto f = sigmoid(parts[2] + forget_bias + c * wcf);
  auto cs = ci * i + c * f;
  auto o = sigmoid(parts[3] + cs * wco);
  auto co = tanh(cs);
  auto hh = co * o;
  std::vector<output> wrt{x, c, h, w, bias, wci, wcf, wco};
  auto dh = f32({batch, units}, 9, 1.0), dc = f32({batch, units}, 10, 1.0);
  auto g_fused = gradients({fused.h, fused.cs}, wrt, {dh, dc});
  auto g_ops = gradients({hh, cs}, wrt, {dh, dc});
  std::vector<output> want{i, cs, f, o, ci, co, hh}, got{fused.i, fused.cs, fused.f, fused.o,
                                                          fused.ci, fused.co, fused.h};
  want.insert(want.end(), g_ops.begin(), g_ops.end());
  got.insert(got.end(), g_fused.begin(), g_fused.end());
  auto rw = eval(want), rg = eval(got);
  for (size_t k = 0; k < rw.size(); ++k) {
    INFO("fetch " << k);
    check_close(rg[k], rw[k], 1e-5, 1e-6);
  }
  // Clipping bounds the cell state; shapes that do not fit are refused, naming the op.
  auto clipped = lstm_block_cell(x, c * 10.0, h, w, bias, {.cell_clip = 0.25});
  auto v = eval1(clipped.cs);
  for (float e : v.flat<float>())
    CHECK(std::abs(e) <= 0.25f);
  CHECK_THROWS_WITH(lstm_block_cell(x, c, h, f32({in + units, 3 * units}, 11, 1.0), bias),
                    Catch::Contains("LSTMBlockCell") && Catch::Contains("columns"));
}

TEST_CASE("dynamic_rnn refuses a sequence length past the time steps, naming the input",
          "[actors][rnn]") {
  graph g;
  basic_rnn_cell cell(g, 2, 3, {.name = "refusing_cell"});
  auto xs = placeholder(g, dtype::f32, shape{-1, 2, 2}, "tokens");
  auto lengths = placeholder(g, dtype::i32, shape{2}, "lengths");
  auto r = dynamic_rnn(cell, xs, cell.zero_state(constant(g, int32_t(2))), lengths);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  tensor x(dtype::f32, shape{4, 2, 2});
  // Lengths up to the time steps run.
  REQUIRE(s.run({{xs, x}, {lengths, tensor::vector<int32_t>({4, 1})}}, {r.outputs}).ok());
  // One past them is refused, not clipped; the message names the input and both numbers.
  auto bad = s.run({{xs, x}, {lengths, tensor::vector<int32_t>({5, 1})}}, {r.outputs});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == error_code::invalid_argument);
  std::string m = bad.error().message();
  INFO(m);
  for (const char* part : {"sequence_length 'lengths", "inputs 'tokens", "length of 5", "4 time steps"})
    CHECK(m.find(part) != std::string::npos);
  // The session still runs good steps afterwards.
  CHECK(s.run({{xs, x}, {lengths, tensor::vector<int32_t>({2, 3})}}, {r.outputs}).ok());
}

TEST_CASE("a cell given existing variables shares them instead of making its own", "[rnn]") {
  graph g;
  gru_cell first(g, 3, 2, {.name = "gru"});
  size_t made = g.collection("variables").size();
  std::vector<std::string> asked;
  rnn_cell_options o{.name = "gru"};
  o.existing = [&](const std::string& name) -> std::optional<graph_variable> {
    asked.push_back(name);
    if (name == "gates/kernel")
      return first.gate_kernel;
    if (name == "gates/bias")
      return first.gate_bias;
    if (name == "candidate/kernel")
      return first.candidate_kernel;
    return std::nullopt; // made anew
  };
  gru_cell second(g, 3, 2, o);
  CHECK(asked == std::vector<std::string>{"gates/kernel", "gates/bias", "candidate/kernel",
                                          "candidate/bias"});
  CHECK(second.gate_kernel.name() == first.gate_kernel.name());
  CHECK(second.candidate_kernel.name() == first.candidate_kernel.name());
  CHECK(second.candidate_bias.name() != first.candidate_bias.name());
  CHECK(g.collection("variables").size() == made + 1);
  // One of another shape is refused, naming both shapes.
  rnn_cell_options wrong{.name = "gru"};
  wrong.existing = [&](const std::string&) -> std::optional<graph_variable> {
    return first.gate_kernel;
  };
  CHECK_THROWS_WITH(gru_cell(g, 4, 2, wrong),
                    Catch::Contains("Trying to share variable gru/gates/kernel, but specified "
                                    "shape [6,4] and found shape [5,4]"));
}
