#pragma once
// Recurrent networks: cells and dynamic_rnn, a while_loop over time (TensorFlow's
// tf.nn.dynamic_rnn with time_major = true).
//
//   lstm_cell cell(g, /*input_size=*/128, /*units=*/256);
//   auto r = dynamic_rnn(cell, inputs /* [time, batch, 128] */, cell.zero_state(batch),
//                        lengths /* int32 [batch] */);
//   // r.outputs: [time, batch, 256], zero past each example's length
//   // r.final_state: each example's state at its length
//
// The loop reads one time step per iteration from a TensorArray and writes the output to
// another; gradients() differentiates through it (docs/control_flow.md).

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

/// A [fan_in, fan_out] variable initialised Glorot-uniform: U(-a, a), a = sqrt(6 / (fan_in +
/// fan_out)).
graph_variable glorot_variable(graph& g, const shape& s, dtype t, int64_t seed,
                               const std::string& name);

/// One time step of a recurrent network on [batch, input] inputs.
class rnn_cell {
public:
  virtual ~rnn_cell() = default;
  /// The width of each state tensor ([batch, width] each).
  virtual std::vector<int64_t> state_sizes() const = 0;
  virtual int64_t output_size() const = 0;
  /// The step's output and new state.
  virtual std::pair<output, std::vector<output>> step(output x,
                                                      const std::vector<output>& state) = 0;
  /// Zeros for every state tensor, for `batch` (an int32 scalar) examples.
  std::vector<output> zero_state(output batch) const;
  /// Whether the cell has ops that take a whole sequence (a fused lstm_cell: BlockLSTM).
  virtual bool can_run_sequence() const { return false; }
  /// With them, the cell over all of time-major `inputs` ([time, batch, input]): sets `outputs`
  /// ([time, batch, output]) and `final_state`; false, building nothing, without them.
  virtual bool run_sequence(output inputs, const std::vector<output>& state, output& outputs,
                            std::vector<output>& final_state);

  graph* graph_ptr() const { return g_; }
  dtype type() const { return type_; }

protected:
  explicit rnn_cell(graph& g, dtype type) : g_(&g), type_(type) {}
  graph* g_;
  dtype type_;
};

struct rnn_cell_options {
  dtype type = dtype::f32;
  std::string name = "rnn_cell";
  int64_t seed = 0;
  /// lstm_cell: each step is one fused LSTMBlockCell op (ops/layers/lstm_block.hpp; float32) instead of
  /// a dozen ops, with the same weights and results. Other cells ignore it.
  bool fused = false;
  /// Variables to share (TensorFlow's variable reuse): asked for each variable by its name under
  /// the cell's scope ("kernel", "gates/bias"); a variable it returns is used instead of a new
  /// one (its shape must be the one the cell needs), nullopt makes a new one.
  std::function<std::optional<graph_variable>(const std::string& name)> existing;
};

/// h' = tanh([x, h] W + b) (TensorFlow's BasicRNNCell); state {h}.
class basic_rnn_cell : public rnn_cell {
public:
  basic_rnn_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options = {});
  std::vector<int64_t> state_sizes() const override { return {units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<output, std::vector<output>> step(output x, const std::vector<output>& state) override;
  graph_variable kernel, bias;

private:
  int64_t units_;
};

/// TensorFlow's BasicLSTMCell: i, j, f, o = split([x, h] W + b); c' = c σ(f + forget_bias) +
/// σ(i) tanh(j); h' = tanh(c') σ(o). State {c, h}; output h'.
class lstm_cell : public rnn_cell {
public:
  lstm_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options = {},
            double forget_bias = 1.0);
  std::vector<int64_t> state_sizes() const override { return {units_, units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<output, std::vector<output>> step(output x, const std::vector<output>& state) override;
  /// Fused: one BlockLSTM over the sequence.
  bool can_run_sequence() const override { return fused_; }
  bool run_sequence(output inputs, const std::vector<output>& state, output& outputs,
                    std::vector<output>& final_state) override;
  graph_variable kernel, bias;

private:
  int64_t units_;
  double forget_bias_;
  bool fused_;
};

/// TensorFlow's GRUCell: r, u = σ([x, h] W_g + b_g) (b_g starts at 1); c = tanh([x, r·h] W_c +
/// b_c); h' = u·h + (1 − u)·c. State {h}; output h'.
class gru_cell : public rnn_cell {
public:
  gru_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options = {});
  std::vector<int64_t> state_sizes() const override { return {units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<output, std::vector<output>> step(output x, const std::vector<output>& state) override;
  graph_variable gate_kernel, gate_bias, candidate_kernel, candidate_bias;

private:
  int64_t units_;
};

/// Cells stacked: layer i's output is layer i+1's input; the state is every layer's state in
/// order (TensorFlow's MultiRNNCell). The cells must outlive it.
class multi_rnn_cell : public rnn_cell {
public:
  explicit multi_rnn_cell(std::vector<rnn_cell*> cells);
  std::vector<int64_t> state_sizes() const override;
  int64_t output_size() const override { return cells_.back()->output_size(); }
  std::pair<output, std::vector<output>> step(output x, const std::vector<output>& state) override;
  /// Layer by layer when every cell can run the whole sequence.
  bool can_run_sequence() const override;
  bool run_sequence(output inputs, const std::vector<output>& state, output& outputs,
                    std::vector<output>& final_state) override;

private:
  std::vector<rnn_cell*> cells_;
};

struct rnn_result {
  output outputs;                 ///< [time, batch, output_size]
  std::vector<output> final_state; ///< each [batch, width]
};

struct dynamic_rnn_options {
  int parallel_iterations = 32;
  std::string name = "rnn";
};

/// Runs `cell` over time-major `inputs` ([time, batch, input]) in a while_loop. With
/// `sequence_length` (int32 [batch]), steps at or past an example's length output zeros and
/// keep its state, so `final_state` is each example's state at its length. Without it, a cell
/// that can run the whole sequence in one op (a fused lstm_cell, stacks of them) does so instead
/// of the loop: no per-step control is needed (TensorFlow's LSTMBlockFusedCell).
rnn_result dynamic_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                       output sequence_length = {}, dynamic_rnn_options options = {});

/// Time-major `x` ([time, batch, ...]) with each example's first `lengths[b]` steps reversed and
/// the rest left in place (TensorFlow's reverse_sequence with seq_axis 0, batch_axis 1).
output reverse_sequence(output x, output lengths, std::string_view name = {});

struct bidirectional_result {
  output forward_outputs, backward_outputs; ///< [time, batch, units] each, in input order
  std::vector<output> forward_state, backward_state;
};
/// `fw` reads each sequence forwards, `bw` backwards (its outputs are reversed back into input
/// order); zero past each length when `sequence_length` is given (TensorFlow's
/// bidirectional_dynamic_rnn). Concatenate the outputs along axis 2 for the usual encoder.
bidirectional_result bidirectional_dynamic_rnn(rnn_cell& fw, rnn_cell& bw, output inputs,
                                               std::vector<output> fw_state,
                                               std::vector<output> bw_state,
                                               output sequence_length = {},
                                               dynamic_rnn_options options = {});

/// The same computation unrolled statically over a known number of time steps.
rnn_result static_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                      output sequence_length = {});

} // namespace runnel
