// LSTMBlockCell and LSTMBlockCellGrad, BlockLSTM and BlockLSTMGrad (the cell over a whole
// time-major sequence): their definitions (ops/layers/lstm_block.hpp says what they compute).
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

/// BlockLSTM's inputs after seq_len_max: x [time, batch, input], then the cell's. Returns
/// [time, batch, cell] (dimensions may be unknown: -1).
status check_block_inputs(inference_context& c, int64_t* time, int64_t* batch, int64_t* cell) {
  RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
  RUNNEL_RETURN_IF_ERROR(c.require_rank(1, 3));
  for (int i : {2, 3, 4})
    RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 2));
  for (int i : {5, 6, 7, 8})
    RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 1));
  auto dim = [&](int i, int d) {
    auto& s = c.input_shape(i);
    return s.has_known_rank() ? s[d] : int64_t(-1);
  };
  *time = dim(1, 0);
  *batch = dim(1, 1);
  *cell = dim(2, 1) >= 0 ? dim(2, 1) : dim(3, 1);
  if (*cell < 0 && dim(8, 0) >= 0 && dim(8, 0) % 4 == 0)
    *cell = dim(8, 0) / 4;
  for (int i : {2, 3})
    if (*batch >= 0 && dim(i, 0) >= 0 && dim(i, 0) != *batch)
      return c.input_error(i, "has " + std::to_string(dim(i, 0)) + " rows, x a batch of " +
                                  std::to_string(*batch));
  if (*cell >= 0 && dim(4, 1) >= 0 && dim(4, 1) != 4 * *cell)
    return c.input_error(4, "must have 4 x " + std::to_string(*cell) + " columns");
  if (*cell >= 0 && dim(1, 2) >= 0 && dim(4, 0) >= 0 && dim(4, 0) != dim(1, 2) + *cell)
    return c.input_error(4, "must have input + cell = " + std::to_string(dim(1, 2) + *cell) +
                                " rows");
  return {};
}

op_def block_op(const char* name) {
  op_def d(name);
  d.input("seq_len_max", dtype::i64);
  for (auto in : gate_inputs)
    d.input(in, "T");
  return d;
}

op_def cell_op(const char* name) {
  op_def d(name);
  for (auto in : gate_inputs)
    d.input(in, "T");
  return d;
}

} // namespace

RUNNEL_OP_FAMILY(lstm_block) {
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

  op_def block = block_op("BlockLSTM");
  for (auto out : cell_outputs)
    block.output(out, "T");
  throw_if_error(reg.add(block.type_attr("T", {dtype::f32})
                             .attr("forget_bias", attr_type::real, 1.0)
                             .attr("cell_clip", attr_type::real, 3.0)
                             .attr("use_peephole", attr_type::boolean, false)
                             .shape_fn([](inference_context& c) -> status {
                               int64_t time, batch, units;
                               RUNNEL_RETURN_IF_ERROR(
                                   check_block_inputs(c, &time, &batch, &units));
                               for (int o = 0; o < 7; ++o)
                                 c.set_output(o, shape{time, batch, units});
                               return {};
                             })));
  op_def block_grad = block_op("BlockLSTMGrad");
  for (auto in : cell_outputs)
    block_grad.input(in, "T");
  block_grad.input("cs_grad", "T").input("h_grad", "T");
  for (auto out : {"x_grad", "cs_prev_grad", "h_prev_grad", "w_grad", "wci_grad", "wcf_grad",
                   "wco_grad", "b_grad"})
    block_grad.output(out, "T");
  throw_if_error(reg.add(block_grad.type_attr("T", {dtype::f32})
                             .attr("use_peephole", attr_type::boolean, false)
                             .shape_fn([](inference_context& c) -> status {
                               int64_t time, batch, units;
                               RUNNEL_RETURN_IF_ERROR(
                                   check_block_inputs(c, &time, &batch, &units));
                               for (int o = 0; o < 8; ++o)
                                 c.set_output(o, c.input_shape(o + 1));
                               return {};
                             })));
}

} // namespace runnel
