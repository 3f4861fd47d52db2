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

#include <string>
#include <utility>
#include <vector>

#include "ops/builder.hpp"

namespace runnel {

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

protected:
  explicit rnn_cell(graph& g, dtype type) : g_(&g), type_(type) {}
  graph* g_;
  dtype type_;
};

struct rnn_cell_options {
  dtype type = dtype::f32;
  std::string name = "rnn_cell";
  int64_t seed = 0;
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
  graph_variable kernel, bias;

private:
  int64_t units_;
  double forget_bias_;
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
/// keep its state, so `final_state` is each example's state at its length.
rnn_result dynamic_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                       output sequence_length = {}, dynamic_rnn_options options = {});

/// The same computation unrolled statically over a known number of time steps.
rnn_result static_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                      output sequence_length = {});

} // namespace runnel
