#include "runnel/ops/layers/attention.hpp"

#include "runnel/ops/layers/nn_layers.hpp"

namespace runnel {
namespace {

graph_variable weights(graph& g, int64_t rows, int64_t cols, dtype t, int64_t seed,
                       const char* name) {
  return glorot_variable(g, shape{rows, cols}, t, seed, name);
}

/// [batch, time, depth] · [depth, k] → [batch, time, k].
output time_distributed(output x, output w, int64_t depth, int64_t k) {
  auto flat = reshape(x, std::vector<int64_t>{-1, depth});
  auto prefix = strided_slice(shape_of(x), {0}, {2}, {1});
  return reshape(matmul(flat, w),
                 concat({prefix, constant(x.owner(), tensor::vector<int32_t>({int32_t(k)}))}, 0));
}

} // namespace

attention_mechanism::attention_mechanism(output memory, output memory_lengths, int64_t query_depth,
                                         attention_options o)
    : memory_(memory), query_depth_(query_depth), o_(std::move(o)) {
  const shape& s = memory.shape();
  depth_ = s.has_known_rank() && s.rank() == 3 && s[2] > 0 ? s[2] : o_.memory_depth;
  if ((s.has_known_rank() && s.rank() != 3) || depth_ < 1 ||
      (o_.memory_depth > 0 && depth_ != o_.memory_depth))
    throw error(invalid_argument("attention_mechanism: memory '" + memory.name() +
                                 "' must be [batch, time, depth] with a known depth (or "
                                 "memory_depth in the options), got " +
                                 s.to_string()));
  if (query_depth < 1)
    throw error(invalid_argument("attention_mechanism: the query depth must be positive"));
  graph& g = memory.owner();
  auto scope = g.name_scope(o_.name);
  if (o_.kind == attention_kind::luong) {
    memory_weights = weights(g, depth_, query_depth, o_.type, o_.seed, "memory_layer");
  } else {
    int64_t units = o_.units > 0 ? o_.units : query_depth;
    o_.units = units;
    memory_weights = weights(g, depth_, units, o_.type, o_.seed, "memory_layer");
    query_weights = weights(g, query_depth, units, o_.type, o_.seed + 1, "query_layer");
    score_vector = variable(g, random_uniform(g, shape{units}, o_.type, o_.seed + 2) * 0.2 - 0.1,
                            "attention_v");
  }
  attach(memory, memory_lengths);
}

attention_mechanism::attention_mechanism(const attention_mechanism& shared, output memory,
                                         output memory_lengths)
    : memory_weights(shared.memory_weights), query_weights(shared.query_weights),
      score_vector(shared.score_vector), depth_(shared.depth_), query_depth_(shared.query_depth_),
      o_(shared.o_) {
  const shape& s = memory.shape();
  if (s.has_known_rank() && (s.rank() != 3 || (s[2] >= 0 && s[2] != depth_)))
    throw error(invalid_argument("attention_mechanism: memory '" + memory.name() + "' " +
                                 s.to_string() + " must be [batch, time, " +
                                 std::to_string(depth_) + "] to share weights"));
  auto scope = memory.owner().name_scope(o_.name);
  attach(memory, memory_lengths);
}

void attention_mechanism::attach(output memory, output memory_lengths) {
  memory_ = memory;
  int64_t k = o_.kind == attention_kind::luong ? query_depth_ : o_.units;
  keys_ = time_distributed(memory, memory_weights.value, depth_, k);
  if (memory_lengths.valid()) {
    auto time = strided_slice(shape_of(memory), {1}, {2}, {1}, 0, 0, 0, 0, 1);
    auto valid = sequence_mask(memory_lengths, time, o_.type); // [batch, time]
    mask_bias_ = (valid - 1.0) * 1e9;
  }
}

std::pair<output, output> attention_mechanism::attend(output query) const {
  graph& g = query.owner();
  auto scope = g.name_scope(o_.name);
  output scores; // [batch, time]
  if (o_.kind == attention_kind::luong) {
    scores = squeeze(batch_matmul(keys_, expand_dims(query, 2)), {2});
  } else {
    auto q = expand_dims(matmul(query, query_weights.value), 1); // [batch, 1, units]
    scores = sum(tanh(keys_ + q) * score_vector.value, {2});
  }
  if (mask_bias_.valid())
    scores = scores + mask_bias_;
  auto alignments = softmax(scores);
  auto context = squeeze(batch_matmul(expand_dims(alignments, 1), memory_), {1});
  return {context, alignments};
}

attention_wrapper::attention_wrapper(rnn_cell& cell, attention_mechanism& mechanism,
                                     int64_t attention_size, rnn_cell_options options)
    : rnn_cell(*cell.graph_ptr(), cell.type()), cell_(&cell), mechanism_(&mechanism),
      attention_size_(attention_size) {
  auto scope = g_->name_scope(options.name == "rnn_cell" ? "attention_wrapper" : options.name);
  output_weights =
      glorot_variable(*g_, shape{cell.output_size() + mechanism.depth(), attention_size}, type_,
                      options.seed, "attention_layer");
}

attention_wrapper::attention_wrapper(const attention_wrapper& shared,
                                     attention_mechanism& mechanism)
    : rnn_cell(*shared.g_, shared.type_), output_weights(shared.output_weights),
      cell_(shared.cell_), mechanism_(&mechanism), attention_size_(shared.attention_size_) {}

std::vector<int64_t> attention_wrapper::state_sizes() const {
  auto s = cell_->state_sizes();
  s.push_back(attention_size_);
  return s;
}

std::pair<output, std::vector<output>> attention_wrapper::step(output x,
                                                               const std::vector<output>& state) {
  std::vector<output> inner(state.begin(), state.end() - 1);
  auto [h, next] = cell_->step(concat({x, state.back()}, 1), inner);
  auto [context, alignments] = mechanism_->attend(h);
  last_alignments_ = alignments;
  auto a = tanh(matmul(concat({h, context}, 1), output_weights.value));
  next.push_back(a);
  return {a, next};
}

} // namespace runnel
