// LSTMBlockCell's gradient: LSTMBlockCellGrad for the gates, then the products for x, h_prev and
// w (ops/layers/lstm_block.hpp); BlockLSTM's: BlockLSTMGrad, which does it all.
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/lstm_block.hpp"

namespace runnel {

RUNNEL_GRADIENT_FAMILY(lstm_block) {
  reg.add("LSTMBlockCell", [](const gradient_context& c) -> std::vector<output> {
    auto x = c.input(0), h_prev = c.input(2), w = c.input(3);
    std::vector<endpoint> in;
    for (int i = 0; i < 8; ++i)
      in.push_back(c.input(i).ep());
    for (int o = 0; o < 6; ++o) // i, cs, f, o, ci, co
      in.push_back(c.out(o).ep());
    in.push_back(c.grad(1).ep()); // only the state's gradients flow back, as in TensorFlow
    in.push_back(c.grad(6).ep());
    auto outs = c.g.build("LSTMBlockCellGrad", "LSTMBlockCellGrad", in,
                          {{"use_peephole", c.n.attrs.at("use_peephole")}});
    auto dicfo = outs[1];
    const shape& xs = x.shape();
    if (!xs.has_known_rank() || xs.rank() != 2 || xs[1] < 0)
      throw error(unimplemented("gradient of LSTMBlockCell '" + c.n.name +
                                "' needs x's input size, got " + xs.to_string()));
    int64_t input = xs[1];
    auto xh_grad = matmul(dicfo, w, {.transpose_b = true});
    auto x_grad = slice(xh_grad, {0, 0}, {-1, input});
    auto h_grad = slice(xh_grad, {0, input}, {-1, -1});
    auto w_grad = matmul(concat({x, h_prev}, 1), dicfo, {.transpose_a = true});
    auto b_grad = sum(dicfo, {0});
    return {x_grad, outs[0], h_grad, w_grad, outs[2], outs[3], outs[4], b_grad};
  });
  reg.add_non_differentiable("LSTMBlockCellGrad");
  // BlockLSTM: one BlockLSTMGrad computes every input's gradient (the step count has none).
  reg.add("BlockLSTM", [](const gradient_context& c) -> std::vector<output> {
    std::vector<endpoint> in;
    for (int i = 0; i < 9; ++i)
      in.push_back(c.input(i).ep());
    for (int o = 0; o < 7; ++o)
      in.push_back(c.out(o).ep());
    in.push_back(c.grad(1).ep()); // cs's and h's, as in TensorFlow
    in.push_back(c.grad(6).ep());
    auto outs = c.g.build("BlockLSTMGrad", "BlockLSTMGrad", in,
                          {{"use_peephole", c.n.attrs.at("use_peephole")}});
    std::vector<output> grads{output()};
    grads.insert(grads.end(), outs.begin(), outs.end());
    return grads;
  });
  reg.add_non_differentiable("BlockLSTMGrad");
}

} // namespace runnel
