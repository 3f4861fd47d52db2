#pragma once
// TensorFlow's fused LSTM cell: LSTMBlockCell computes one LSTM step in one op, and
// LSTMBlockCellGrad its gradient (kernels: ops/cpu/lstm_block.cpp, ops/cuda/lstm_block.cu).
//
//   [i, ci, f, o] = [x, h_prev] · w + b         (gates in this order, as BasicLSTMCell's i, j, f, o)
//   i  = σ(i + cs_prev · wci)                    (peepholes wci, wcf, wco only with use_peephole)
//   f  = σ(f + forget_bias + cs_prev · wcf)
//   ci = tanh(ci)
//   cs = clip(ci · i + cs_prev · f, ±cell_clip)  (no clipping when cell_clip <= 0)
//   o  = σ(o + cs · wco),  co = tanh(cs),  h = co · o
//
//   auto step = lstm_block_cell(x, c, h, w, b, {.forget_bias = 1.0});
//   // step.cs, step.h: the new state; gradients() flows through LSTMBlockCellGrad
//
// BlockLSTM runs the cell over a whole time-major sequence in one op (TensorFlow's BlockLSTM):
//
//   auto seq = block_lstm(steps /* int64 scalar */, x /* [time, batch, input] */, c0, h0, w, b);
//   // seq.h, seq.cs, ...: [time, batch, cell]; zeros at steps >= `steps`
//
// The gradient treats the clipping as the identity, as TensorFlow's does.
#include <string>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

struct lstm_block_options {
  double forget_bias = 1.0;
  double cell_clip = -1; ///< <= 0: no clipping (TensorFlow's op defaults to 3; its cells pass -1)
  bool use_peephole = false;
  std::string name = "LSTMBlockCell";
};

/// The op's seven outputs, each [batch, cell] (BlockLSTM: [time, batch, cell]).
struct lstm_block_outputs {
  output i, cs, f, o, ci, co, h;
};

/// One fused LSTM step: x [batch, input], cs_prev and h_prev [batch, cell], w [input + cell,
/// 4·cell], b [4·cell]; the peephole weights [cell] with use_peephole (zeros otherwise).
lstm_block_outputs lstm_block_cell(output x, output cs_prev, output h_prev, output w, output b,
                                   const lstm_block_options& o = {}, output wci = {},
                                   output wcf = {}, output wco = {});

/// The cell over the first `seq_len_max` (an int64 scalar) steps of x [time, batch, input], from
/// the state cs_prev, h_prev [batch, cell]; w, b and the peepholes as lstm_block_cell's.
lstm_block_outputs block_lstm(output seq_len_max, output x, output cs_prev, output h_prev,
                              output w, output b, const lstm_block_options& o = {},
                              output wci = {}, output wcf = {}, output wco = {});

} // namespace runnel
