// The fused LSTM cell's builder (ops/layers/lstm_block.hpp).
#include "runnel/ops/layers/lstm_block.hpp"

namespace runnel {

namespace {

/// The peephole weights the op takes: the given ones, or zeros [cell] without use_peephole.
void default_peepholes(graph& g, const lstm_block_options& o, output b, output& wci, output& wcf,
                       output& wco, const char* who) {
  if (wci.valid() && wcf.valid() && wco.valid())
    return;
  if (o.use_peephole)
    throw error(invalid_argument(std::string(who) + ": use_peephole needs wci, wcf and wco"));
  const shape& s = b.shape();
  if (!s.has_known_rank() || s.rank() != 1 || s[0] < 0 || s[0] % 4 != 0)
    throw error(invalid_argument(std::string(who) + ": the bias '" + b.name() +
                                 "' must be a vector of a known length 4 x cell, got " +
                                 s.to_string()));
  auto zero = zeros(g, b.type(), shape{s[0] / 4}, "no_peephole");
  wci = wcf = wco = zero;
}

attr_map attrs_of(const lstm_block_options& o) {
  return {{"forget_bias", o.forget_bias},
          {"cell_clip", o.cell_clip},
          {"use_peephole", o.use_peephole}};
}

} // namespace

lstm_block_outputs lstm_block_cell(output x, output cs_prev, output h_prev, output w, output b,
                                   const lstm_block_options& o, output wci, output wcf,
                                   output wco) {
  graph& g = x.owner();
  auto scope = g.name_scope(o.name);
  default_peepholes(g, o, b, wci, wcf, wco, "lstm_block_cell");
  auto outs = g.build("LSTMBlockCell", "LSTMBlockCell",
                      {x.ep(), cs_prev.ep(), h_prev.ep(), w.ep(), wci.ep(), wcf.ep(), wco.ep(),
                       b.ep()},
                      attrs_of(o));
  return {outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6]};
}

lstm_block_outputs block_lstm(output seq_len_max, output x, output cs_prev, output h_prev,
                              output w, output b, const lstm_block_options& o, output wci,
                              output wcf, output wco) {
  graph& g = x.owner();
  auto scope = g.name_scope(o.name == "LSTMBlockCell" ? "BlockLSTM" : o.name);
  default_peepholes(g, o, b, wci, wcf, wco, "block_lstm");
  auto outs = g.build("BlockLSTM", "BlockLSTM",
                      {seq_len_max.ep(), x.ep(), cs_prev.ep(), h_prev.ep(), w.ep(), wci.ep(),
                       wcf.ep(), wco.ep(), b.ep()},
                      attrs_of(o));
  return {outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6]};
}

} // namespace runnel
