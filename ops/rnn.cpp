#include "ops/rnn.hpp"

#include <cmath>

#include "ops/control_flow.hpp"
#include "ops/tensor_array.hpp"

namespace runnel {
namespace {

/// Glorot-uniform weights: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)).
graph_variable glorot(graph& g, const shape& s, dtype t, int64_t seed, const std::string& name) {
  double a = std::sqrt(6.0 / double(s[0] + s[1]));
  auto u = random_uniform(g, s, t, seed, name + "_init");
  return variable(g, (u * 2.0 - 1.0) * a, name);
}

/// `fresh` where the step is inside the example's length, else `kept` (mask: [batch, 1] of 0/1).
output choose(output mask, output fresh, output kept) {
  return fresh * mask + kept * (1.0 - mask);
}

void check_inputs(const rnn_cell& cell, output inputs, const std::vector<output>& state,
                  const char* what) {
  if (inputs.shape().has_known_rank() && inputs.shape().rank() != 3)
    throw error(invalid_argument(std::string(what) + ": inputs '" + inputs.name() +
                                 "' must be [time, batch, input], got " +
                                 inputs.shape().to_string()));
  if (state.size() != cell.state_sizes().size())
    throw error(invalid_argument(std::string(what) + ": the cell's state has " +
                                 std::to_string(cell.state_sizes().size()) + " tensors, got " +
                                 std::to_string(state.size())));
}

} // namespace

std::vector<output> rnn_cell::zero_state(output batch) const {
  std::vector<output> out;
  for (int64_t width : state_sizes()) {
    auto dims = stack({batch, constant(*g_, int32_t(width))});
    // Reshaped so that the width is known statically (what the cell's matmuls and concat
    // gradients need).
    out.push_back(reshape(fill(dims, cast(constant(*g_, 0.0), type_)), {-1, width}));
  }
  return out;
}

basic_rnn_cell::basic_rnn_cell(graph& g, int64_t input_size, int64_t units,
                               rnn_cell_options options)
    : rnn_cell(g, options.type), units_(units) {
  auto scope = g.name_scope(options.name);
  kernel = glorot(g, shape{input_size + units, units}, options.type, options.seed, "kernel");
  bias = variable(g, zeros(g, options.type, shape{units}), "bias");
}

std::pair<output, std::vector<output>> basic_rnn_cell::step(output x,
                                                           const std::vector<output>& state) {
  auto h = tanh(matmul(concat({x, state.at(0)}, 1), kernel.value) + bias.value);
  return {h, {h}};
}

lstm_cell::lstm_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options,
                     double forget_bias)
    : rnn_cell(g, options.type), units_(units), forget_bias_(forget_bias) {
  auto scope = g.name_scope(options.name == "rnn_cell" ? "lstm_cell" : options.name);
  kernel = glorot(g, shape{input_size + units, 4 * units}, options.type, options.seed, "kernel");
  bias = variable(g, zeros(g, options.type, shape{4 * units}), "bias");
}

std::pair<output, std::vector<output>> lstm_cell::step(output x,
                                                      const std::vector<output>& state) {
  auto gates = matmul(concat({x, state.at(1)}, 1), kernel.value) + bias.value;
  auto parts = split(gates, 4, 1);
  auto c = state.at(0) * sigmoid(parts[2] + forget_bias_) + sigmoid(parts[0]) * tanh(parts[1]);
  auto h = tanh(c) * sigmoid(parts[3]);
  return {h, {c, h}};
}

rnn_result dynamic_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                       output sequence_length, dynamic_rnn_options options) {
  check_inputs(cell, inputs, initial_state, "dynamic_rnn");
  graph& g = inputs.owner();
  auto scope = g.name_scope(options.name);
  dtype t = inputs.type();
  auto steps = reshape(strided_slice(shape_of(inputs), {0}, {1}, {1}), std::vector<int64_t>{});
  shape step_shape = inputs.shape().has_known_rank()
                         ? shape{inputs.shape()[1], inputs.shape()[2]}
                         : shape::unknown();
  auto in = tensor_array(g, t, steps, {.element_shape = step_shape, .name = "inputs"})
                .unstack(inputs);
  shape out_shape{step_shape.has_known_rank() ? step_shape[0] : -1, cell.output_size()};
  tensor_array outs(g, t, steps, {.element_shape = out_shape, .name = "outputs"});
  std::vector<output> vars{constant(g, int32_t(0)), outs.flow()};
  vars.insert(vars.end(), initial_state.begin(), initial_state.end());
  auto r = while_loop(
      [&](const std::vector<output>& v) { return less(v[0], steps); },
      [&](const std::vector<output>& v) {
        std::vector<output> state(v.begin() + 2, v.end());
        auto [y, next] = cell.step(in.read(v[0]), state);
        if (sequence_length.valid()) {
          auto live = cast(expand_dims(less(v[0], sequence_length), 1), t);
          y = y * live;
          for (size_t k = 0; k < next.size(); ++k)
            next[k] = choose(live, next[k], state[k]);
        }
        std::vector<output> body{v[0] + constant(g, int32_t(1)),
                                 outs.with_flow(v[1]).write(v[0], y).flow()};
        body.insert(body.end(), next.begin(), next.end());
        return body;
      },
      vars, {.parallel_iterations = options.parallel_iterations, .name = "while"});
  return {outs.with_flow(r[1]).stack(), std::vector<output>(r.begin() + 2, r.end())};
}

rnn_result static_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                      output sequence_length) {
  check_inputs(cell, inputs, initial_state, "static_rnn");
  if (!inputs.shape().has_known_rank() || inputs.shape()[0] < 0)
    throw error(invalid_argument("static_rnn: inputs '" + inputs.name() +
                                 "' need a known number of time steps, got " +
                                 inputs.shape().to_string()));
  graph& g = inputs.owner();
  int64_t steps = inputs.shape()[0];
  auto xs = unstack(inputs, steps);
  std::vector<output> ys, state = std::move(initial_state);
  for (int64_t s = 0; s < steps; ++s) {
    auto [y, next] = cell.step(xs[size_t(s)], state);
    if (sequence_length.valid()) {
      auto live = cast(expand_dims(less(constant(g, int32_t(s)), sequence_length), 1),
                       inputs.type());
      y = y * live;
      for (size_t k = 0; k < next.size(); ++k)
        next[k] = choose(live, next[k], state[k]);
    }
    ys.push_back(y);
    state = next;
  }
  return {stack(ys), state};
}

} // namespace runnel
