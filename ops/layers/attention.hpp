#pragma once
// Attention for encoder-decoder models: Luong's "general" score and Bahdanau's additive score
// over an encoder's outputs (TensorFlow's LuongAttention and BahdanauAttention), and a cell that
// attends after every step of another (TensorFlow's AttentionWrapper, with Luong's input
// feeding: the previous attentional vector joins each input).
//
//   attention_mechanism att(memory /* [batch, time, depth] */, lengths /* int32 [batch] */,
//                           /*query_depth=*/256, {.kind = attention_kind::luong});
//   lstm_cell dec(g, embed + 256, 256);
//   attention_wrapper cell(dec, att, /*attention_size=*/256);
//   auto r = dynamic_rnn(cell, targets_in, cell.zero_state(batch), target_lengths);
//   // r.outputs: [time, batch, 256] attentional vectors; inside a loop body,
//   // cell.last_alignments() are the step's alignments [batch, time]
//
// Memory positions at or past each example's length get no attention (their scores are pushed
// to -1e9 before the softmax). Every op has a gradient; the weights are variables.

#include <string>

#include "runnel/ops/layers/rnn.hpp"

namespace runnel {

enum class attention_kind {
  luong,    ///< score(h, m) = hᵀ W m
  bahdanau, ///< score(h, m) = vᵀ tanh(W₁ m + W₂ h)
};

struct attention_options {
  attention_kind kind = attention_kind::luong;
  int64_t units = 0; ///< Bahdanau's hidden width (0: the query depth); Luong ignores it
  /// The memory's depth where its static shape does not say (e.g. a while loop's outputs).
  int64_t memory_depth = 0;
  dtype type = dtype::f32;
  std::string name = "attention";
  int64_t seed = 0;
};

class attention_mechanism {
public:
  /// `memory` [batch, time, depth] with a known depth (or options.memory_depth); `memory_lengths` int32 [batch] or invalid
  /// (every position valid). Keys are computed once here, outside any loop.
  attention_mechanism(output memory, output memory_lengths, int64_t query_depth,
                      attention_options o = {});
  /// A mechanism over another memory (e.g. the first tiled for beam search) with the weights of
  /// `shared`.
  attention_mechanism(const attention_mechanism& shared, output memory, output memory_lengths);
  /// The context [batch, depth] and alignments [batch, time] for `query` [batch, query_depth].
  std::pair<output, output> attend(output query) const;

  output memory() const { return memory_; }
  int64_t depth() const { return depth_; }
  attention_kind kind() const { return o_.kind; }
  /// Luong: W [depth, query_depth]. Bahdanau: W₁ [depth, units], W₂ [query_depth, units], v.
  graph_variable memory_weights, query_weights, score_vector;

private:
  void attach(output memory, output memory_lengths);
  output memory_, keys_, mask_bias_;
  int64_t depth_, query_depth_;
  attention_options o_;
};

/// `cell` (whose input size must be the decoder input's plus `attention_size`) followed by
/// attention over `mechanism`: output and last state entry a = tanh([h, context] W_c), which is
/// fed to the next step with its input. State: the cell's, then a [batch, attention_size].
class attention_wrapper : public rnn_cell {
public:
  attention_wrapper(rnn_cell& cell, attention_mechanism& mechanism, int64_t attention_size,
                    rnn_cell_options options = {});
  /// The same cell and weights as `shared`, attending over `mechanism` instead.
  attention_wrapper(const attention_wrapper& shared, attention_mechanism& mechanism);
  std::vector<int64_t> state_sizes() const override;
  int64_t output_size() const override { return attention_size_; }
  std::pair<output, std::vector<output>> step(output x, const std::vector<output>& state) override;
  /// The alignments [batch, time] of the last step built.
  output last_alignments() const { return last_alignments_; }
  graph_variable output_weights;

private:
  rnn_cell* cell_;
  attention_mechanism* mechanism_;
  int64_t attention_size_;
  output last_alignments_;
};

} // namespace runnel
