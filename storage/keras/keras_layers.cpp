#include "runnel/storage/keras/keras_layers.hpp"

#include <cmath>

#include "runnel/ops/graph/builder.hpp"

namespace runnel::keras {
namespace {

[[noreturn]] void fail(const std::string& what) { throw error(invalid_argument(what)); }

template <class T> T get(const nlohmann::json& config, const char* key, T fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null())
    return fallback;
  std::string what = std::string("config '") + key + "'";
  if constexpr (std::is_same_v<T, int64_t>) {
    return json_int(*it, what);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!it->is_array())
      fail(what + " is " + it->dump() + ", not a list of integers");
    std::vector<int64_t> out;
    for (auto& v : *it)
      out.push_back(json_int(v, what));
    return out;
  } else {
    try {
      return it->get<T>();
    } catch (const nlohmann::json::exception&) {
      fail(what + " is " + it->dump() + ", not the expected type");
    }
  }
}

/// A count the layer needs positive (units, filters).
int64_t positive(const nlohmann::json& config, const char* key, int64_t fallback) {
  int64_t v = get<int64_t>(config, key, fallback);
  if (v < 1 || v > (int64_t(1) << 31))
    fail(std::string("config '") + key + "' is " + std::to_string(v) +
         ", not a positive count below 2^31");
  return v;
}

/// A pair like kernel_size or strides: [a, b] or a single number.
std::vector<int64_t> pair_of(const nlohmann::json& config, const char* key,
                             std::vector<int64_t> fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null())
    return fallback;
  if (it->is_number())
    return {json_int(*it, key), json_int(*it, key)};
  auto v = get<std::vector<int64_t>>(config, key, fallback);
  if (v.size() != 2)
    fail(std::string("config '") + key + "' must hold 2 numbers, not " + it->dump());
  return v;
}

const tensor& weight(const layer_call& c, const std::string& name) {
  auto it = c.weights.find(name);
  if (it == c.weights.end()) {
    std::string have;
    for (auto& [k, _] : c.weights)
      have += (have.empty() ? "" : ", ") + k;
    fail("its weight '" + name + "' is not in the file (found: " +
         (have.empty() ? std::string("none") : have) + ")");
  }
  if (it->second.type() != dtype::f32)
    fail("its weight '" + name + "' is " + std::string(runnel::name(it->second.type())) +
         ", not float32");
  return it->second;
}

output input(const layer_call& c, size_t n = 1) {
  if (c.inputs.size() != n)
    fail("it takes " + std::to_string(n) + " input" + (n == 1 ? "" : "s") + ", the model gives " +
         std::to_string(c.inputs.size()));
  return c.inputs[0];
}

output apply_activation(output x, const std::string& a, int keras_major) {
  if (a == "linear" || a.empty())
    return x;
  if (a == "relu")
    return relu(x);
  if (a == "sigmoid")
    return sigmoid(x);
  if (a == "tanh")
    return tanh(x);
  if (a == "softmax")
    return softmax(x);
  if (a == "elu")
    return elu(x);
  if (a == "softplus")
    return softplus(x);
  if (a == "relu6")
    return relu6(x);
  if (a == "swish" || a == "silu")
    return mul(x, sigmoid(x));
  if (a == "hard_sigmoid") {
    graph& g = x.owner();
    // Keras 2: clip(0.2x + 0.5, 0, 1); Keras 3: relu6(x + 3) / 6.
    float slope = keras_major >= 3 ? 1.0f : 1.2f;
    auto scaled = add(mul(x, constant(g, slope)), constant(g, 3.0f));
    return mul(relu6(scaled), constant(g, 1.0f / 6.0f));
  }
  fail("activation '" + a + "' is not supported (linear, relu, sigmoid, tanh, softmax, elu, "
       "softplus, relu6, swish, hard_sigmoid are)");
}

output activation_of(const layer_call& c, output x, const char* key = "activation") {
  return apply_activation(x, get<std::string>(c.config, key, "linear"), c.keras_major);
}

/// Columns [begin, begin + n) of a matrix, or elements of a vector, as a new tensor.
tensor columns(const tensor& t, int64_t begin, int64_t n) {
  int64_t rows = t.rank() == 2 ? t.dim(0) : 1, cols = t.dim(t.rank() - 1);
  tensor out(dtype::f32, t.rank() == 2 ? shape{rows, n} : shape{n});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k)
      out.data<float>()[r * n + k] = t.data<float>()[r * cols + begin + k];
  return out;
}

tensor row(const tensor& t, int64_t r) {
  int64_t cols = t.dim(1);
  tensor out(dtype::f32, shape{cols});
  std::copy_n(t.data<float>() + r * cols, cols, out.data<float>());
  return out;
}

/// x @ w on the last axis, whatever x's rank (Keras's Dense on sequences).
output dense_apply(output x, output w, int64_t units) {
  const shape& s = x.shape();
  if (!s.has_known_rank() || s.rank() < 2)
    fail("its input must have rank 2 or more, not " + s.to_string());
  if (s.rank() == 2)
    return matmul(x, w);
  std::vector<int64_t> back(s.dims().begin(), s.dims().end() - 1);
  for (size_t i = 1; i < back.size(); ++i)
    if (back[i] < 0)
      fail("its input " + s.to_string() + " needs known inner dimensions");
  back[0] = -1;
  back.push_back(units);
  return reshape(matmul(reshape(x, {-1, s[s.rank() - 1]}), w), back);
}

output dense(layer_call& c) {
  auto x = input(c);
  const tensor& k = weight(c, "kernel");
  int64_t units = positive(c.config, "units", k.dim(1));
  if (k.rank() != 2 || k.dim(1) != units)
    fail("its kernel is " + k.shape().to_string() + ", not [in, " + std::to_string(units) + "]");
  auto y = dense_apply(x, constant(c.g, k, "kernel"), units);
  if (get<bool>(c.config, "use_bias", true))
    y = bias_add(y, constant(c.g, weight(c, "bias"), "bias"));
  return activation_of(c, y);
}

std::string padding_of(const layer_call& c) {
  auto p = get<std::string>(c.config, "padding", "valid");
  if (p != "valid" && p != "same")
    fail("padding '" + p + "' is not supported (valid and same are)");
  return p == "same" ? "SAME" : "VALID";
}

void require_channels_last(const layer_call& c) {
  auto f = get<std::string>(c.config, "data_format", "channels_last");
  if (f != "channels_last")
    fail("data_format '" + f + "' is not supported (channels_last is)");
}

output conv2d_layer(layer_call& c) {
  require_channels_last(c);
  if (pair_of(c.config, "dilation_rate", {1, 1}) != std::vector<int64_t>{1, 1})
    fail("dilation_rate other than 1 is not supported");
  if (get<int64_t>(c.config, "groups", 1) != 1)
    fail("groups other than 1 are not supported");
  auto y = conv2d(input(c), constant(c.g, weight(c, "kernel"), "kernel"),
                  pair_of(c.config, "strides", {1, 1}), padding_of(c));
  if (get<bool>(c.config, "use_bias", true))
    y = bias_add(y, constant(c.g, weight(c, "bias"), "bias"));
  return activation_of(c, y);
}

output pool_layer(layer_call& c, bool max) {
  require_channels_last(c);
  auto window = pair_of(c.config, "pool_size", {2, 2});
  auto strides = pair_of(c.config, "strides", window);
  return max ? max_pool(input(c), window, strides, padding_of(c))
             : avg_pool(input(c), window, strides, padding_of(c));
}

output flatten(layer_call& c) {
  auto x = input(c);
  const shape& s = x.shape();
  if (!s.has_known_rank() || s.rank() < 1)
    fail("its input " + s.to_string() + " has no known rank");
  int64_t n = 1;
  for (int i = 1; i < s.rank(); ++i) {
    if (s[i] < 0)
      fail("its input " + s.to_string() + " needs known inner dimensions");
    n *= s[i];
  }
  return reshape(x, {-1, n});
}

output reshape_layer(layer_call& c) {
  auto target = get<std::vector<int64_t>>(c.config, "target_shape", {});
  target.insert(target.begin(), -1);
  return reshape(input(c), target);
}

output batch_norm(layer_call& c) {
  auto x = input(c);
  int rank = x.shape().rank();
  auto axis_json = c.config.find("axis");
  int64_t axis = -1;
  if (axis_json != c.config.end() && axis_json->is_array()) {
    if (axis_json->size() != 1)
      fail("normalizing over several axes is not supported");
    axis = json_int((*axis_json)[0], "config 'axis'");
  } else if (axis_json != c.config.end() && axis_json->is_number_integer()) {
    axis = json_int(*axis_json, "config 'axis'");
  }
  if (axis != -1 && axis != rank - 1)
    fail("axis " + std::to_string(axis) + " is not supported (the last axis is)");
  double eps = get<double>(c.config, "epsilon", 1e-3);
  const tensor& mean = weight(c, "moving_mean");
  const tensor& var = weight(c, "moving_variance");
  int64_t n = mean.num_elements();
  // Inference: y = x * scale + offset, with scale = gamma / sqrt(var + eps) and
  // offset = beta - mean * scale, folded here once.
  tensor scale(dtype::f32, shape{n}), offset(dtype::f32, shape{n});
  bool has_gamma = get<bool>(c.config, "scale", true), has_beta = get<bool>(c.config, "center", true);
  for (int64_t i = 0; i < n; ++i) {
    float gamma = has_gamma ? weight(c, "gamma").data<float>()[i] : 1.0f;
    float beta = has_beta ? weight(c, "beta").data<float>()[i] : 0.0f;
    float s = gamma / float(std::sqrt(double(var.data<float>()[i]) + eps));
    scale.data<float>()[i] = s;
    offset.data<float>()[i] = beta - mean.data<float>()[i] * s;
  }
  return add(mul(x, constant(c.g, scale, "scale")), constant(c.g, offset, "offset"));
}

output embedding(layer_call& c) {
  auto ids = input(c);
  if (ids.type() != dtype::i32 && ids.type() != dtype::i64)
    ids = cast(ids, dtype::i32); // Keras feeds ids as float32 unless told otherwise
  return gather(constant(c.g, weight(c, "embeddings"), "embeddings"), ids);
}

/// The time steps of a [batch, time, features] input, each [batch, features].
std::vector<output> time_steps(const layer_call& c, output x) {
  const shape& s = x.shape();
  if (!s.has_known_rank() || s.rank() != 3 || s[1] < 1 || s[2] < 0)
    fail("its input must be [batch, time, features] with a known number of time steps, not " +
         s.to_string());
  if (get<bool>(c.config, "stateful", false) || get<bool>(c.config, "return_state", false))
    fail("stateful layers and return_state are not supported");
  auto steps = unstack(x, s[1], 1);
  if (get<bool>(c.config, "go_backwards", false))
    std::reverse(steps.begin(), steps.end());
  return steps;
}

output rnn_result(const layer_call& c, const std::vector<output>& hs) {
  if (get<bool>(c.config, "return_sequences", false))
    return stack(hs, 1);
  return hs.back();
}

output lstm(layer_call& c) {
  auto steps = time_steps(c, input(c));
  int64_t u = positive(c.config, "units", 0);
  const tensor& kt = weight(c, "kernel");
  if (kt.rank() != 2 || kt.dim(1) != 4 * u)
    fail("its kernel is " + kt.shape().to_string() + ", not [in, 4 * units]");
  auto k = constant(c.g, kt, "kernel");
  auto r = constant(c.g, weight(c, "recurrent_kernel"), "recurrent_kernel");
  bool use_bias = get<bool>(c.config, "use_bias", true);
  output b = use_bias ? constant(c.g, weight(c, "bias"), "bias") : output();
  auto act = get<std::string>(c.config, "activation", "tanh");
  auto rec = get<std::string>(c.config, "recurrent_activation", "sigmoid");
  // Zero state shaped like a step's output: [batch, units].
  auto h = matmul(steps[0], constant(c.g, tensor::from_values<float>(
                                             {kt.dim(0), u}, std::vector<float>(size_t(kt.dim(0) * u), 0.f))));
  auto cell = h;
  std::vector<output> hs;
  for (auto& x : steps) {
    auto z = add(matmul(x, k), matmul(h, r));
    if (use_bias)
      z = bias_add(z, b);
    auto gates = split(z, 4, 1); // Keras's order: input, forget, cell, output
    auto i = apply_activation(gates[0], rec, c.keras_major);
    auto f = apply_activation(gates[1], rec, c.keras_major);
    auto g = apply_activation(gates[2], act, c.keras_major);
    auto o = apply_activation(gates[3], rec, c.keras_major);
    cell = add(mul(f, cell), mul(i, g));
    h = mul(o, apply_activation(cell, act, c.keras_major));
    hs.push_back(h);
  }
  return rnn_result(c, hs);
}

output gru(layer_call& c) {
  auto steps = time_steps(c, input(c));
  int64_t u = positive(c.config, "units", 0);
  const tensor& kt = weight(c, "kernel");
  const tensor& rt = weight(c, "recurrent_kernel");
  if (kt.rank() != 2 || kt.dim(1) != 3 * u || rt.rank() != 2 || rt.dim(1) != 3 * u)
    fail("its kernels are " + kt.shape().to_string() + " and " + rt.shape().to_string() +
         ", not [in, 3 * units] and [units, 3 * units]");
  bool reset_after = get<bool>(c.config, "reset_after", true);
  bool use_bias = get<bool>(c.config, "use_bias", true);
  auto act = get<std::string>(c.config, "activation", "tanh");
  auto rec = get<std::string>(c.config, "recurrent_activation", "sigmoid");
  auto k = constant(c.g, kt, "kernel");
  // Biases: reset_after keeps two rows (input and recurrent), else one.
  output b_in, b_rec;
  if (use_bias) {
    const tensor& bt = weight(c, "bias");
    if (reset_after) {
      if (bt.rank() != 2 || bt.dim(0) != 2)
        fail("with reset_after its bias must be [2, 3 * units], not " + bt.shape().to_string());
      b_in = constant(c.g, row(bt, 0), "input_bias");
      b_rec = constant(c.g, row(bt, 1), "recurrent_bias");
    } else {
      b_in = constant(c.g, bt, "bias");
    }
  }
  auto zero = constant(c.g, tensor::from_values<float>(
                                {kt.dim(0), u}, std::vector<float>(size_t(kt.dim(0) * u), 0.f)));
  auto h = matmul(steps[0], zero);
  std::vector<output> hs;
  if (reset_after) {
    auto r = constant(c.g, rt, "recurrent_kernel");
    for (auto& x : steps) {
      auto xz = matmul(x, k);
      auto hz = matmul(h, r);
      if (use_bias) {
        xz = bias_add(xz, b_in);
        hz = bias_add(hz, b_rec);
      }
      auto xs = split(xz, 3, 1), hs3 = split(hz, 3, 1); // update, reset, candidate
      auto z = apply_activation(add(xs[0], hs3[0]), rec, c.keras_major);
      auto rr = apply_activation(add(xs[1], hs3[1]), rec, c.keras_major);
      auto hh = apply_activation(add(xs[2], mul(rr, hs3[2])), act, c.keras_major);
      h = add(hh, mul(z, sub(h, hh)));
      hs.push_back(h);
    }
  } else {
    auto rz = constant(c.g, columns(rt, 0, u), "recurrent_kernel_z");
    auto rr_k = constant(c.g, columns(rt, u, u), "recurrent_kernel_r");
    auto rh = constant(c.g, columns(rt, 2 * u, u), "recurrent_kernel_h");
    for (auto& x : steps) {
      auto xz = matmul(x, k);
      if (use_bias)
        xz = bias_add(xz, b_in);
      auto xs = split(xz, 3, 1);
      auto z = apply_activation(add(xs[0], matmul(h, rz)), rec, c.keras_major);
      auto rr = apply_activation(add(xs[1], matmul(h, rr_k)), rec, c.keras_major);
      auto hh = apply_activation(add(xs[2], matmul(mul(rr, h), rh)), act, c.keras_major);
      h = add(hh, mul(z, sub(h, hh)));
      hs.push_back(h);
    }
  }
  return rnn_result(c, hs);
}

output relu_layer(layer_call& c) {
  if (get<double>(c.config, "negative_slope", 0) != 0 || get<double>(c.config, "threshold", 0) != 0)
    fail("negative_slope and threshold are not supported");
  auto m = c.config.find("max_value");
  if (m != c.config.end() && !m->is_null()) {
    if (!m->is_number() || m->get<double>() != 6)
      fail("max_value other than 6 is not supported");
    return relu6(input(c));
  }
  return relu(input(c));
}

output add_layer(layer_call& c) {
  if (c.inputs.size() < 2)
    fail("Add needs at least two inputs");
  auto y = c.inputs[0];
  for (size_t i = 1; i < c.inputs.size(); ++i)
    y = add(y, c.inputs[i]);
  return y;
}

output concatenate(layer_call& c) {
  if (c.inputs.size() < 2)
    fail("Concatenate needs at least two inputs");
  int64_t axis = get<int64_t>(c.config, "axis", -1);
  if (axis < 0)
    axis += c.inputs[0].shape().rank();
  return concat(c.inputs, axis);
}

} // namespace

int64_t json_int(const nlohmann::json& j, const std::string& what) {
  constexpr int64_t limit = int64_t(1) << 40;
  if (j.is_number_integer() && !j.is_number_unsigned()) {
    int64_t v = j.get<int64_t>();
    if (v >= -limit && v <= limit)
      return v;
  } else if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v <= uint64_t(limit))
      return int64_t(v);
  } else if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) <= double(limit))
      return int64_t(d);
  }
  fail(what + " is " + j.dump() + ", not an integer within +-2^40");
}

const std::map<std::string, layer_builder>& layer_builders() {
  static const std::map<std::string, layer_builder> builders = {
      {"Dense", dense},
      {"Conv2D", conv2d_layer},
      {"Convolution2D", conv2d_layer},
      {"MaxPooling2D", [](layer_call& c) { return pool_layer(c, true); }},
      {"MaxPool2D", [](layer_call& c) { return pool_layer(c, true); }},
      {"AveragePooling2D", [](layer_call& c) { return pool_layer(c, false); }},
      {"AvgPool2D", [](layer_call& c) { return pool_layer(c, false); }},
      {"Flatten", flatten},
      {"Reshape", reshape_layer},
      {"Dropout", [](layer_call& c) { return input(c); }},
      {"BatchNormalization", batch_norm},
      {"Activation", [](layer_call& c) { return activation_of(c, input(c)); }},
      {"ReLU", relu_layer},
      {"Softmax", [](layer_call& c) { return softmax(input(c)); }},
      {"Embedding", embedding},
      {"LSTM", lstm},
      {"GRU", gru},
      {"Add", add_layer},
      {"Concatenate", concatenate},
  };
  return builders;
}

} // namespace runnel::keras
