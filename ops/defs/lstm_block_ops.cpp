// LSTMBlockCell and LSTMBlockCellGrad: their definitions (ops/layers/lstm_block.hpp says what
// they compute).
#include "runnel/ops/graph/op_def.hpp"

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

} // namespace runnel
