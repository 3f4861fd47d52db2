#include "runnel/ops/layers/rnn.hpp"

#include <cmath>

#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel {
graph_variable glorot_variable(graph& g, const shape& s, dtype t, int64_t seed,
                               const std::string& name) {
  double a = std::sqrt(6.0 / double(s[0] + s[1]));
  auto u = random_uniform(g, s, t, seed, name + "_init");
  return variable(g, (u * 2.0 - 1.0) * a, name);
}

namespace {

/// The cell's variable `name` (under its scope): options.existing's, or `make`'s.
template <class Make>
graph_variable cell_variable(const rnn_cell_options& o, const std::string& name,
                             const shape& needed, Make make) {
  if (o.existing)
    if (auto v = o.existing(name)) {
      if (v->ref.shape() != needed)
        throw error(invalid_argument("Trying to share variable " + v->name() +
                                     ", but specified shape " + needed.to_string() +
                                     " and found shape " + v->ref.shape().to_string()));
      return *v;
    }
  return make();
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
  kernel = cell_variable(options, "kernel", shape{input_size + units, units}, [&] {
    return glorot_variable(g, shape{input_size + units, units}, options.type, options.seed,
                           "kernel");
  });
  bias = cell_variable(options, "bias", shape{units},
                       [&] { return variable(g, zeros(g, options.type, shape{units}), "bias"); });
}

std::pair<output, std::vector<output>> basic_rnn_cell::step(output x,
                                                           const std::vector<output>& state) {
  auto h = tanh(matmul(concat({x, state.at(0)}, 1), kernel.value) + bias.value);
  return {h, {h}};
}

lstm_cell::lstm_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options,
                     double forget_bias)
    : rnn_cell(g, options.type), units_(units), forget_bias_(forget_bias), fused_(options.fused) {
  if (fused_ && options.type != dtype::f32)
    throw error(invalid_argument("lstm_cell: the fused LSTM block computes in float32, got " +
                                 std::string(runnel::name(options.type))));
  auto scope = g.name_scope(options.name == "rnn_cell" ? "lstm_cell" : options.name);
  kernel = cell_variable(options, "kernel", shape{input_size + units, 4 * units}, [&] {
    return glorot_variable(g, shape{input_size + units, 4 * units}, options.type, options.seed,
                           "kernel");
  });
  bias = cell_variable(options, "bias", shape{4 * units}, [&] {
    return variable(g, zeros(g, options.type, shape{4 * units}), "bias");
  });
}

bool rnn_cell::run_sequence(output, const std::vector<output>&, output&, std::vector<output>&) {
  return false;
}

bool lstm_cell::run_sequence(output inputs, const std::vector<output>& state, output& outputs,
                             std::vector<output>& final_state) {
  if (!fused_)
    return false;
  auto steps = cast(strided_slice(shape_of(inputs), {0}, {1}, {1}, 0, 0, 0, 0, 1), dtype::i64);
  auto r = block_lstm(steps, inputs, state.at(0), state.at(1), kernel.value, bias.value,
                      {.forget_bias = forget_bias_, .cell_clip = -1, .name = "block_lstm"});
  auto last = [&](output x) { return strided_slice(x, {-1}, {0}, {1}, 0, 0, 0, 0, 1); };
  outputs = r.h;
  final_state = {last(r.cs), last(r.h)};
  return true;
}

std::pair<output, std::vector<output>> lstm_cell::step(output x,
                                                      const std::vector<output>& state) {
  if (fused_) {
    auto r = lstm_block_cell(x, state.at(0), state.at(1), kernel.value, bias.value,
                             {.forget_bias = forget_bias_, .cell_clip = -1, .name = "lstm_block"});
    return {r.h, {r.cs, r.h}};
  }
  auto gates = matmul(concat({x, state.at(1)}, 1), kernel.value) + bias.value;
  auto parts = split(gates, 4, 1);
  auto c = state.at(0) * sigmoid(parts[2] + forget_bias_) + sigmoid(parts[0]) * tanh(parts[1]);
  auto h = tanh(c) * sigmoid(parts[3]);
  return {h, {c, h}};
}

gru_cell::gru_cell(graph& g, int64_t input_size, int64_t units, rnn_cell_options options)
    : rnn_cell(g, options.type), units_(units) {
  auto scope = g.name_scope(options.name == "rnn_cell" ? "gru_cell" : options.name);
  {
    auto s = g.name_scope("gates");
    gate_kernel = cell_variable(options, "gates/kernel", shape{input_size + units, 2 * units}, [&] {
      return glorot_variable(g, shape{input_size + units, 2 * units}, options.type, options.seed,
                             "kernel");
    });
    gate_bias = cell_variable(options, "gates/bias", shape{2 * units}, [&] {
      return variable(g, ones(g, options.type, shape{2 * units}), "bias");
    });
  }
  auto s = g.name_scope("candidate");
  candidate_kernel =
      cell_variable(options, "candidate/kernel", shape{input_size + units, units}, [&] {
        return glorot_variable(g, shape{input_size + units, units}, options.type,
                               options.seed ? options.seed + 1 : 0, "kernel");
      });
  candidate_bias = cell_variable(options, "candidate/bias", shape{units}, [&] {
    return variable(g, zeros(g, options.type, shape{units}), "bias");
  });
}

std::pair<output, std::vector<output>> gru_cell::step(output x, const std::vector<output>& state) {
  auto h = state.at(0);
  auto gates = split(sigmoid(matmul(concat({x, h}, 1), gate_kernel.value) + gate_bias.value), 2, 1);
  auto c = tanh(matmul(concat({x, gates[0] * h}, 1), candidate_kernel.value) + candidate_bias.value);
  auto u = gates[1];
  auto next = u * h + (1.0 - u) * c;
  return {next, {next}};
}

multi_rnn_cell::multi_rnn_cell(std::vector<rnn_cell*> cells)
    : rnn_cell(*cells.at(0)->graph_ptr(), cells.at(0)->type()), cells_(std::move(cells)) {}

std::vector<int64_t> multi_rnn_cell::state_sizes() const {
  std::vector<int64_t> out;
  for (auto* c : cells_)
    for (auto w : c->state_sizes())
      out.push_back(w);
  return out;
}

std::pair<output, std::vector<output>> multi_rnn_cell::step(output x,
                                                            const std::vector<output>& state) {
  std::vector<output> next;
  size_t at = 0;
  for (size_t i = 0; i < cells_.size(); ++i) {
    size_t n = cells_[i]->state_sizes().size();
    std::vector<output> own(state.begin() + long(at), state.begin() + long(at + n));
    auto scope = g_->name_scope("cell_" + std::to_string(i));
    auto [y, s] = cells_[i]->step(x, own);
    next.insert(next.end(), s.begin(), s.end());
    x = y;
    at += n;
  }
  return {x, next};
}

bool multi_rnn_cell::can_run_sequence() const {
  for (auto* c : cells_)
    if (!c->can_run_sequence())
      return false;
  return true;
}

bool multi_rnn_cell::run_sequence(output inputs, const std::vector<output>& state,
                                  output& outputs, std::vector<output>& final_state) {
  if (!can_run_sequence())
    return false;
  std::vector<output> last;
  size_t at = 0;
  for (size_t i = 0; i < cells_.size(); ++i) {
    size_t n = cells_[i]->state_sizes().size();
    std::vector<output> own(state.begin() + long(at), state.begin() + long(at + n)), next;
    auto scope = g_->name_scope("cell_" + std::to_string(i));
    cells_[i]->run_sequence(inputs, own, inputs, next);
    last.insert(last.end(), next.begin(), next.end());
    at += n;
  }
  outputs = inputs;
  final_state = std::move(last);
  return true;
}

output reverse_sequence(output x, output lengths, std::string_view name) {
  graph& g = x.owner();
  if (lengths.type() != dtype::i32)
    lengths = cast(lengths, dtype::i32);
  auto scope = g.name_scope(name.empty() ? "ReverseSequence" : name);
  // Row (t, b) of x viewed as [time * batch, ...] is t * batch + b; it reads row
  // (len_b − 1 − t, b) while t < len_b.
  auto dims = shape_of(x);
  auto steps = reshape(slice(dims, std::vector<int64_t>{0}, std::vector<int64_t>{1}),
                       std::vector<int64_t>{});
  auto batch = reshape(slice(dims, std::vector<int64_t>{1}, std::vector<int64_t>{1}),
                       std::vector<int64_t>{});
  auto zero = constant(g, int32_t(0)), one = constant(g, int32_t(1));
  auto t = expand_dims(range(g, zero, steps, one), 1);      // [time, 1]
  auto b = expand_dims(range(g, zero, batch, one), 0);      // [1, batch]
  auto len = expand_dims(lengths, 0);                        // [1, batch]
  auto src_t = select(less(t, len), len - 1 - t, t + b * 0); // [time, batch]
  auto rows = reshape(src_t * batch + b, std::vector<int64_t>{-1});
  auto flat_shape = concat({constant(g, {int32_t(-1)}),
                            slice(dims, std::vector<int64_t>{2}, std::vector<int64_t>{-1})},
                           0);
  auto out = reshape(gather(reshape(x, flat_shape), rows), dims);
  // The result has x's shape exactly (dims is shape_of(x)): keep what is known of it statically,
  // so that cells reading it (the fused LSTM's gradient) see the input size.
  if (x.shape().has_known_rank())
    g.mutable_node(out.node_id()).output_shapes[size_t(out.index())] = x.shape();
  return out;
}

bidirectional_result bidirectional_dynamic_rnn(rnn_cell& fw, rnn_cell& bw, output inputs,
                                               std::vector<output> fw_state,
                                               std::vector<output> bw_state,
                                               output sequence_length,
                                               dynamic_rnn_options options) {
  graph& g = inputs.owner();
  auto scope = g.name_scope(options.name == "rnn" ? "bidirectional_rnn" : options.name);
  auto fw_options = options, bw_options = options;
  fw_options.name = "fw";
  bw_options.name = "bw";
  auto f = dynamic_rnn(fw, inputs, std::move(fw_state), sequence_length, fw_options);
  output back;
  rnn_result r;
  if (sequence_length.valid()) {
    r = dynamic_rnn(bw, reverse_sequence(inputs, sequence_length), std::move(bw_state),
                    sequence_length, bw_options);
    back = reverse_sequence(r.outputs, sequence_length);
  } else {
    r = dynamic_rnn(bw, reverse(inputs, {0}), std::move(bw_state), {}, bw_options);
    back = reverse(r.outputs, {0});
  }
  return {f.outputs, back, f.final_state, r.final_state};
}

rnn_result dynamic_rnn(rnn_cell& cell, output inputs, std::vector<output> initial_state,
                       output sequence_length, dynamic_rnn_options options) {
  check_inputs(cell, inputs, initial_state, "dynamic_rnn");
  graph& g = inputs.owner();
  auto scope = g.name_scope(options.name);
  if (!sequence_length.valid()) {
    rnn_result whole;
    if (cell.run_sequence(inputs, initial_state, whole.outputs, whole.final_state))
      return whole;
  }
  dtype t = inputs.type();
  auto steps = reshape(strided_slice(shape_of(inputs), {0}, {1}, {1}), std::vector<int64_t>{});
  if (sequence_length.valid()) {
    // A length past the time steps would be clipped silently: refuse it.
    auto longest = reduce_max(cast(sequence_length, dtype::i32));
    auto check = assert_that(
        less_equal(longest, steps),
        {constant(g, tensor::scalar<std::string>("dynamic_rnn '" + options.name +
                                                 "': sequence_length '" +
                                                 sequence_length.name() + "' holds a length of")),
         longest,
         constant(g, tensor::scalar<std::string>("but inputs '" + inputs.name() + "' have")),
         steps, constant(g, tensor::scalar<std::string>("time steps"))},
        3, "check_sequence_length");
    auto after = g.control_dependencies({check});
    sequence_length = identity(sequence_length);
  }
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
