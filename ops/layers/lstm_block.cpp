// The fused LSTM cell's builder (ops/layers/lstm_block.hpp).
#include "runnel/ops/layers/lstm_block.hpp"

namespace runnel {

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

} // namespace runnel
