// BlockLSTM, the LSTM cell over a whole sequence in one op: against LSTMBlockCell unrolled step
// by step (peepholes, clipping, seq_len_max, every gradient), and dynamic_rnn's use of it for
// fused cells against the unfused cells' loop.
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/layers/rnn.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor uniform_f32(const shape& s, uint32_t seed, float scale) {
  tensor t(dtype::f32, s);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t.flat<float>()) {
    x = x * 1664525u + 1013904223u;
    v = (float(x >> 8) / float(1u << 24) * 2.f - 1.f) * scale;
  }
  return t;
}

} // namespace

TEST_CASE("BlockLSTM matches LSTMBlockCell unrolled: outputs, zeros past seq_len_max, gradients",
          "[actors][rnn][lstm]") {
  graph g;
  const int time = 6, live = 4, batch = 3, in = 4, units = 5;
  auto c = [&](shape s, uint32_t seed, float scale) {
    return constant(g, uniform_f32(s, seed, scale));
  };
  auto x = c({time, batch, in}, 1, 1.f), c0 = c({batch, units}, 2, 1.f),
       h0 = c({batch, units}, 3, 1.f), w = c({in + units, 4 * units}, 4, 0.4f),
       b = c({4 * units}, 5, 0.5f), wci = c({units}, 6, 0.5f), wcf = c({units}, 7, 0.5f),
       wco = c({units}, 8, 0.5f);
  lstm_block_options o{.forget_bias = 0.7, .cell_clip = 0.9, .use_peephole = true};
  auto block = block_lstm(constant(g, int64_t(live)), x, c0, h0, w, b, o, wci, wcf, wco);
  // The same by hand, one cell per live step.
  std::vector<output> hs, css;
  output cs = c0, h = h0;
  for (int t = 0; t < live; ++t) {
    auto xt = squeeze(slice(x, {t, 0, 0}, {1, -1, -1}), {0});
    auto step = lstm_block_cell(xt, cs, h, w, b, o, wci, wcf, wco);
    cs = step.cs, h = step.h;
    hs.push_back(h), css.push_back(cs);
  }
  auto dh = c({time, batch, units}, 9, 1.f), dc = c({time, batch, units}, 10, 1.f);
  auto block_loss = sum(block.h * dh) + sum(block.cs * dc);
  output cell_loss = constant(g, 0.f);
  for (int t = 0; t < live; ++t) {
    auto at = [&](output v) { return squeeze(slice(v, {t, 0, 0}, {1, -1, -1}), {0}); };
    cell_loss = cell_loss + sum(hs[size_t(t)] * at(dh)) + sum(css[size_t(t)] * at(dc));
  }
  std::vector<output> wrt{x, c0, h0, w, b, wci, wcf, wco};
  auto gb = gradients({block_loss}, wrt), gc = gradients({cell_loss}, wrt);
  std::vector<output> got{block.h, block.cs}, want{stack(hs), stack(css)};
  got.insert(got.end(), gb.begin(), gb.end());
  want.insert(want.end(), gc.begin(), gc.end());
  auto rg = eval(got), rw = eval(want);
  for (size_t k = 0; k < 2; ++k) { // live steps equal, zeros after
    INFO("output " << k);
    auto all = rg[k].flat<float>();
    auto expect = rw[k].flat<float>();
    for (size_t e = 0; e < all.size(); ++e)
      CHECK(all[e] == Approx(e < expect.size() ? expect[e] : 0.f).margin(1e-6));
  }
  for (size_t k = 2; k < rg.size(); ++k) {
    INFO("gradient of input " << k - 2);
    check_close(rg[k], rw[k], 1e-5, 1e-6);
  }
  // A wrong step count is refused, naming the op.
  auto bad = block_lstm(constant(g, int64_t(-1)), x, c0, h0, w, b, o, wci, wcf, wco);
  CHECK_THAT(eval_error(bad.h).message(),
             Catch::Contains("BlockLSTM") && Catch::Contains("seq_len_max"));
}

TEST_CASE("dynamic_rnn runs stacked fused LSTM cells as BlockLSTMs, equal to the unfused loop",
          "[actors][rnn][lstm]") {
  graph g;
  const int steps = 7, batch = 4, in = 6, units = 8;
  // Variables live in the runtime by name: names of this test's own.
  lstm_cell p0(g, in, units, {.name = "stack_plain0", .seed = 31}),
      p1(g, units, units, {.name = "stack_plain1", .seed = 32});
  lstm_cell f0(g, in, units, {.name = "stack_fused0", .seed = 31, .fused = true}),
      f1(g, units, units, {.name = "stack_fused1", .seed = 32, .fused = true});
  multi_rnn_cell plain({&p0, &p1}), fused({&f0, &f1});
  auto xs = placeholder(g, dtype::f32, shape{steps, batch, in}, "xs");
  auto zero = plain.zero_state(constant(g, int32_t(batch)));
  auto a = dynamic_rnn(plain, xs, zero, {}, {.name = "plain_rnn"});
  auto b = dynamic_rnn(fused, xs, zero, {}, {.name = "fused_rnn"});
  size_t blocks = 0, loops = 0;
  for (auto& n : g.nodes()) {
    blocks += n.op == "BlockLSTM";
    loops += n.op == "Enter" && n.name.find("fused_rnn") != std::string::npos;
  }
  CHECK(blocks == 2);
  CHECK(loops == 0);
  auto loss = [](const rnn_result& r) {
    return sum(square(r.outputs)) + sum(r.final_state[0]) + sum(r.final_state[3]);
  };
  auto ga = gradients({loss(a)}, {xs, p0.kernel.value, p1.kernel.value, p1.bias.value});
  auto gb = gradients({loss(b)}, {xs, f0.kernel.value, f1.kernel.value, f1.bias.value});
  std::vector<output> fa{a.outputs}, fb{b.outputs};
  fa.insert(fa.end(), a.final_state.begin(), a.final_state.end());
  fb.insert(fb.end(), b.final_state.begin(), b.final_state.end());
  fa.insert(fa.end(), ga.begin(), ga.end());
  fb.insert(fb.end(), gb.begin(), gb.end());
  feed_list feeds{{xs, uniform_f32({steps, batch, in}, 4, 1.f)}};
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto ra = s.run(feeds, fa).value(), rb = s.run(feeds, fb).value();
  for (size_t k = 0; k < ra.size(); ++k) {
    INFO("fetch " << k);
    check_close(rb[k], ra[k], 1e-5, 1e-6);
  }
}
