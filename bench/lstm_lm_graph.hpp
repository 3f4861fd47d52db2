// The LSTM language model of bench `lstm_lm_step` (bench/sequence_bench.cpp on CPUs,
// bench/gpu_bench.cpp on a GPU) and of the test that places it on a simulated GPU: an embedding
// table, two LSTM layers, a full softmax over the vocabulary, plain SGD — the shapes PyTorch's
// peer (bench/peers/lstm_lm_torch.py) builds with nn.LSTM.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/rnn.hpp"
#include "runnel/ops/train/optimizers.hpp"

namespace runnel::bench {

/// How the language model's layers are built.
enum class lm_layers {
  cells,  ///< static_rnn of lstm_cells built from a dozen ops per step
  fused,  ///< static_rnn of fused cells: one LSTMBlockCell per layer and step
  blocks, ///< dynamic_rnn of fused cells: one BlockLSTM per layer over the whole sequence
};

struct lm_shape {
  int64_t vocab = 10'000, hidden = 512, batch = 32, time_steps = 35;
};

/// The model's graph, its training op and one batch of random ids and targets to feed.
struct lstm_lm_graph {
  graph g;
  output ids, targets, loss;
  operation train;
  feed_list feeds;

  /// `tag` prefixes the variables' names (a runtime's variables are shared by name).
  lstm_lm_graph(lm_shape s, lm_layers layers, const std::string& tag) {
    ids = placeholder(g, dtype::i32, shape{s.time_steps, s.batch}, "ids");
    targets = placeholder(g, dtype::i32, shape{s.time_steps * s.batch}, "targets");
    bool fused = layers != lm_layers::cells;
    auto table = variable(
        g, (random_uniform(g, shape{s.vocab, s.hidden}, dtype::f32, 1) - 0.5) * 0.1,
        tag + "embedding");
    lstm_cell first(g, s.hidden, s.hidden, {.name = tag + "layer0", .seed = 2, .fused = fused});
    lstm_cell second(g, s.hidden, s.hidden, {.name = tag + "layer1", .seed = 3, .fused = fused});
    multi_rnn_cell cells({&first, &second});
    auto inputs = embedding_lookup(table.value, ids);
    auto zero = cells.zero_state(constant(g, int32_t(s.batch)));
    auto rnn = layers == lm_layers::blocks ? dynamic_rnn(cells, inputs, zero)
                                           : static_rnn(cells, inputs, zero);
    auto w = variable(
        g, (random_uniform(g, shape{s.hidden, s.vocab}, dtype::f32, 4) - 0.5) * 0.1,
        tag + "softmax_w");
    auto b = variable(g, zeros(g, dtype::f32, shape{s.vocab}), tag + "softmax_b");
    auto logits = bias_add(
        matmul(reshape(rnn.outputs, {s.time_steps * s.batch, s.hidden}), w.value), b.value);
    loss = mean(sparse_softmax_cross_entropy_with_logits(logits, targets).first);
    train = gradient_descent_optimizer(0.1).minimize(loss);
    std::mt19937 rng(9);
    std::vector<int32_t> id_values(size_t(s.time_steps * s.batch)), target_values(id_values.size());
    for (size_t i = 0; i < id_values.size(); ++i) {
      id_values[i] = int32_t(rng() % uint32_t(s.vocab));
      target_values[i] = int32_t(rng() % uint32_t(s.vocab));
    }
    feeds = {{ids, tensor(dtype::i32, shape{s.time_steps, s.batch})},
             {targets, tensor::vector<int32_t>(target_values)}};
    std::memcpy(feeds[0].second.raw_data(), id_values.data(), id_values.size() * sizeof(int32_t));
  }
};

} // namespace runnel::bench
