#include "runnel/apps/train/fashion_mnist_model.hpp"

#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/train/replica.hpp"

namespace runnel::apps {

std::unique_ptr<model> build(const model_options& o) {
  const std::string& kind = o.kind;
  auto m = std::make_unique<model>();
  graph& g = m->g;
  g.set_seed(o.seed);
  // Distributed: variables on the ps tasks, the rest on this worker.
  std::optional<graph::scope_guard> placed;
  if (o.device_fn)
    placed.emplace(g.device(o.device_fn));
  // Mixed precision: weights stay float32 and are cast where read; the loss is float32.
  auto low = [&](output t) { return to_compute(t, o.compute); };
  // Batches come from the dataset iterator "train"; evaluation (and --input memory) feeds them.
  auto next = iterator_get_next(g, "train", {dtype::f32, dtype::i32}, {{-1, 784}, {-1}}, "input");
  m->x = next[0];
  m->y = next[1];
  output logits;
  if (kind == "mlp") {
    output h;
    {
      auto s = g.name_scope("hidden");
      auto w = variable(g, truncated_normal(g, {784, 512}, 0.05), "weights");
      auto b = variable(g, zeros(g, dtype::f32, {512}), "biases");
      h = relu(bias_add(matmul(low(m->x), low(w)), low(b)));
    }
    auto s = g.name_scope("logits");
    auto w = variable(g, truncated_normal(g, {512, 10}, 0.05), "weights");
    auto b = variable(g, zeros(g, dtype::f32, {10}), "biases");
    logits = bias_add(matmul(h, low(w)), low(b));
  } else if (kind == "cnn") {
    // Two 3x3 conv/pool blocks (32 and 64 channels), a dense layer of 256 with dropout.
    m->training = placeholder(g, dtype::boolean, shape{}, "training");
    auto conv_block = [&](output in, int64_t in_ch, int64_t out_ch, const char* name) {
      auto s = g.name_scope(name);
      auto w = variable(g, truncated_normal(g, {3, 3, in_ch, out_ch}, 0.1), "weights");
      auto b = variable(g, filled(g, dtype::f32, {out_ch}, 0.05), "biases");
      return max_pool(relu(bias_add(conv2d(in, low(w), {1, 1}, "SAME"), low(b))), {2, 2}, {2, 2},
                      "SAME");
    };
    auto img = reshape(low(m->x), std::vector<int64_t>{-1, 28, 28, 1}, "image");
    auto h = conv_block(conv_block(img, 1, 32, "conv1"), 32, 64, "conv2"); // [n, 7, 7, 64]
    output dense;
    {
      auto s = g.name_scope("dense");
      auto w = variable(g, truncated_normal(g, {7 * 7 * 64, 256}, 0.02), "weights");
      auto b = variable(g, filled(g, dtype::f32, {256}, 0.05), "biases");
      auto flat = reshape(h, std::vector<int64_t>{-1, 7 * 7 * 64});
      // Dropout draws float32 noise: it runs on the float32 activations.
      dense = low(dropout(to_compute(relu(bias_add(matmul(flat, low(w)), low(b))), dtype::f32), 0.5,
                          m->training));
    }
    auto s = g.name_scope("logits");
    auto w = variable(g, truncated_normal(g, {256, 10}, 0.05), "weights");
    auto b = variable(g, zeros(g, dtype::f32, {10}), "biases");
    logits = bias_add(matmul(dense, low(w)), low(b));
  } else {
    auto s = g.name_scope("softmax");
    auto w = variable(g, zeros(g, dtype::f32, {784, 10}), "weights");
    auto b = variable(g, zeros(g, dtype::f32, {10}), "biases");
    logits = bias_add(matmul(low(m->x), low(w)), low(b));
  }
  logits = to_compute(logits, dtype::f32);
  m->loss = mean(sparse_softmax_cross_entropy_with_logits(logits, m->y).first, {}, false, "loss");
  m->accuracy = mean(cast(equal(cast(argmax(logits, 1), dtype::i32), m->y), dtype::f32), {}, false,
                     "accuracy");
  m->step = variable(g, constant(g, int64_t(0)), "global_step", false);
  auto& opt = m->opt;
  if (o.opt_name == "adam")
    opt = std::make_unique<adam_optimizer>(o.lr);
  else if (o.opt_name == "sgd")
    opt = std::make_unique<gradient_descent_optimizer>(o.lr);
  else
    opt = std::make_unique<momentum_optimizer>(o.lr, 0.9);
  if (o.compute == dtype::f16) // float16 gradients underflow without loss scaling
    m->scaled = std::make_unique<loss_scale_optimizer>(*opt);
  auto grads = m->scaled ? m->scaled->compute_gradients(m->loss) : opt->compute_gradients(m->loss);
  if (o.wire_bf16) // the gradients go to the ps tasks as bfloat16: half the bytes
    for (auto& [grad, var] : grads)
      send_as_bf16(grad.values());
  if (o.sync) {
    m->sync = std::make_unique<sync_replicas_optimizer>(*opt, *o.sync);
    m->train = m->sync->apply_gradients(grads, m->step);
    m->sync_step = output(&g, endpoint{m->train.node_id(), 0});
  } else if (m->scaled) {
    m->train = m->scaled->apply_gradients(grads, &m->step);
  } else {
    m->train = opt->apply_gradients(grads, &m->step);
  }
  m->ready = variables_ready(g);
  return m;
}

} // namespace runnel::apps
