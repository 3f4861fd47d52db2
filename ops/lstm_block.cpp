// LSTMBlockCell and LSTMBlockCellGrad: definitions, the builder and the gradient
// (ops/lstm_block.hpp says what they compute).
#include "runnel/ops/lstm_block.hpp"

#include "runnel/ops/gradients.hpp"
#include "runnel/ops/op_def.hpp"

namespace runnel {
namespace {

const char* const gate_inputs[] = {"x", "cs_prev", "h_prev", "w", "wci", "wcf", "wco", "b"};
const char* const cell_outputs[] = {"i", "cs", "f", "o", "ci", "co", "h"};

/// Checks the inputs' shapes and returns [batch, cell] (dimensions may be unknown: -1).
status check_cell_inputs(inference_context& c, int64_t* batch, int64_t* cell) {
  for (int i : {0, 1, 2, 3})
    RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 2));
  for (int i : {4, 5, 6, 7})
    RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 1));
  auto dim = [&](int i, int d) {
    auto& s = c.input_shape(i);
    return s.has_known_rank() ? s[d] : int64_t(-1);
  };
  *batch = dim(0, 0);
  *cell = dim(1, 1) >= 0 ? dim(1, 1) : dim(2, 1);
  if (*cell < 0 && dim(7, 0) >= 0 && dim(7, 0) % 4 == 0)
    *cell = dim(7, 0) / 4;
  for (int i : {1, 2})
    if (*cell >= 0 && dim(i, 1) >= 0 && dim(i, 1) != *cell)
      return c.input_error(i, "has " + std::to_string(dim(i, 1)) + " columns, the cell " +
                                  std::to_string(*cell));
  if (*cell >= 0 && dim(3, 1) >= 0 && dim(3, 1) != 4 * *cell)
    return c.input_error(3, "must have 4 x " + std::to_string(*cell) + " columns");
  if (*cell >= 0 && dim(0, 1) >= 0 && dim(3, 0) >= 0 && dim(3, 0) != dim(0, 1) + *cell)
    return c.input_error(3, "must have input + cell = " + std::to_string(dim(0, 1) + *cell) +
                                " rows");
  for (int i : {4, 5, 6})
    if (*cell >= 0 && dim(i, 0) >= 0 && dim(i, 0) != *cell)
      return c.input_error(i, "must have " + std::to_string(*cell) + " entries");
  if (*cell >= 0 && dim(7, 0) >= 0 && dim(7, 0) != 4 * *cell)
    return c.input_error(7, "must have 4 x " + std::to_string(*cell) + " entries");
  return {};
}

op_def cell_op(const char* name) {
  op_def d(name);
  for (auto in : gate_inputs)
    d.input(in, "T");
  return d;
}

} // namespace

void register_lstm_block_ops(op_registry& reg) {
  op_def cell = cell_op("LSTMBlockCell");
  for (auto out : cell_outputs)
    cell.output(out, "T");
  throw_if_error(reg.add(cell.type_attr("T", {dtype::f32})
                             .attr("forget_bias", attr_type::real, 1.0)
                             .attr("cell_clip", attr_type::real, 3.0)
                             .attr("use_peephole", attr_type::boolean, false)
                             .shape_fn([](inference_context& c) -> status {
                               int64_t batch, units;
                               RUNNEL_RETURN_IF_ERROR(check_cell_inputs(c, &batch, &units));
                               for (int o = 0; o < 7; ++o)
                                 c.set_output(o, shape{batch, units});
                               return {};
                             })));
  op_def grad = cell_op("LSTMBlockCellGrad");
  for (auto in : cell_outputs)
    if (std::string(in) != "h")
      grad.input(in, "T");
  grad.input("cs_grad", "T").input("h_grad", "T");
  throw_if_error(reg.add(grad.output("cs_prev_grad", "T")
                             .output("dicfo", "T")
                             .output("wci_grad", "T")
                             .output("wcf_grad", "T")
                             .output("wco_grad", "T")
                             .type_attr("T", {dtype::f32})
                             .attr("use_peephole", attr_type::boolean, false)
                             .shape_fn([](inference_context& c) -> status {
                               int64_t batch, units;
                               RUNNEL_RETURN_IF_ERROR(check_cell_inputs(c, &batch, &units));
                               c.set_output(0, shape{batch, units});
                               c.set_output(1, shape{batch, units < 0 ? -1 : 4 * units});
                               for (int o = 2; o < 5; ++o)
                                 c.set_output(o, shape{units});
                               return {};
                             })));
}

lstm_block_outputs lstm_block_cell(output x, output cs_prev, output h_prev, output w, output b,
                                   const lstm_block_options& o, output wci, output wcf,
                                   output wco) {
  graph& g = x.owner();
  auto scope = g.name_scope(o.name);
  if (!wci.valid() || !wcf.valid() || !wco.valid()) {
    if (o.use_peephole)
      throw error(invalid_argument("lstm_block_cell: use_peephole needs wci, wcf and wco"));
    const shape& s = b.shape();
    if (!s.has_known_rank() || s.rank() != 1 || s[0] < 0 || s[0] % 4 != 0)
      throw error(invalid_argument("lstm_block_cell: the bias '" + b.name() +
                                   "' must be a vector of a known length 4 x cell, got " +
                                   s.to_string()));
    auto zero = zeros(g, x.type(), shape{s[0] / 4}, "no_peephole");
    wci = wcf = wco = zero;
  }
  auto outs = g.build("LSTMBlockCell", "LSTMBlockCell",
                      {x.ep(), cs_prev.ep(), h_prev.ep(), w.ep(), wci.ep(), wcf.ep(), wco.ep(),
                       b.ep()},
                      {{"forget_bias", o.forget_bias},
                       {"cell_clip", o.cell_clip},
                       {"use_peephole", o.use_peephole}});
  return {outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6]};
}

void register_lstm_block_gradients(gradient_registry& reg) {
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
}

} // namespace runnel
