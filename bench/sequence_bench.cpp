// Benchmarks of the sequence and text models' building blocks:
//   embedding_sparse_update  one training step (lookup, loss, backward, update) of a 1M × 128
//                            f32 table with 1,000 rows touched, beside the same step on a
//                            1,000 × 128 variable updated densely: step-time ratio (target
//                            <= 2, i.e. independent of the table's size), with gradient descent
//                            and with Adagrad (a slot the size of the table)
//   lstm_lm_step             a training step (forward, backward, SGD) of a 2-layer LSTM language
//                            model (vocabulary 10k, hidden 512, batch 32, 35 steps, a BlockLSTM
//                            per layer, full softmax) against PyTorch's nn.LSTM on the same
//                            shapes (bench/peers/lstm_lm_torch.py): ratio of median step times
//                            (target <= 1)
// Prints `bench <name>: <figure> <unit> (<ratio>x <reference>)`. Run with
// `env -u OPENBLAS_CORETYPE` (our sandbox's setting halves OpenBLAS).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cpu_info.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/bench/lstm_lm_graph.hpp"
#include "runnel/bench/peer.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/train/optimizers.hpp"

using namespace runnel;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A training step on a `rows` × `cols` variable: a lookup of `touched` distinct rows (sparse),
/// or the whole variable read densely (dense), then loss = sum(rows · x) and an update.
class update_step {
public:
  update_step(runtime& rt, int64_t rows, int64_t cols, int64_t touched, bool sparse, bool adagrad)
      : rows_(rows), touched_(touched), rng_(7) {
    // Variables are runtime-wide by name: one name per configuration.
    auto name = std::string(sparse ? "sparse_" : "dense_") + (adagrad ? "adagrad" : "sgd");
    auto table = variable(g_, random_uniform(g_, shape{rows, cols}, dtype::f32, 1), name);
    ids_ = placeholder(g_, dtype::i32, shape{touched}, "ids");
    auto x = filled(g_, dtype::f32, shape{touched, cols}, 0.5, "x");
    auto looked = sparse ? embedding_lookup(table.value, ids_) : table.value;
    auto loss = sum(looked * x);
    gradient_descent_optimizer sgd(0.01);
    adagrad_optimizer ada(0.01);
    optimizer& opt = adagrad ? static_cast<optimizer&>(ada) : sgd;
    train_ = opt.minimize(loss);
    s_ = std::make_unique<session>(rt, g_);
    throw_if_error(s_->run({global_variables_initializer(g_)}));
    all_.resize(static_cast<size_t>(rows));
    std::iota(all_.begin(), all_.end(), 0);
    for (int w = 0; w < 3; ++w)
      run();
  }
  /// Seconds of one step.
  double run() {
    // Distinct rows each step, spread over the table (a partial Fisher-Yates shuffle).
    for (int64_t i = 0; i < touched_; ++i)
      std::swap(all_[size_t(i)], all_[size_t(i + int64_t(rng_() % uint64_t(rows_ - i)))]);
    auto feed = tensor::vector<int32_t>(std::vector<int32_t>(all_.begin(), all_.begin() + touched_));
    double t0 = now();
    throw_if_error(s_->run({{ids_, feed}}, {}, {train_}).error());
    return now() - t0;
  }

private:
  graph g_;
  output ids_;
  operation train_;
  std::unique_ptr<session> s_;
  int64_t rows_, touched_;
  std::vector<int32_t> all_;
  std::mt19937 rng_;
};

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void embedding_sparse_update() {
  runtime rt;
  const int64_t rows = 1'000'000, cols = 128, touched = 1'000;
  for (bool adagrad : {false, true}) {
    update_step dense(rt, touched, cols, touched, false, adagrad);
    update_step sparse(rt, rows, cols, touched, true, adagrad);
    // Alternating steps, so that the machine's noise falls on both alike.
    std::vector<double> td, ts;
    for (int r = 0; r < 300; ++r) {
      td.push_back(dense.run());
      ts.push_back(sparse.run());
    }
    double d = median(td), sp = median(ts);
    const char* which = adagrad ? "adagrad" : "sgd";
    std::printf("embedding_sparse_update (%s): 1M x 128 table, 1,000 rows touched: %.1f us per "
                "step; 1,000 x 128 dense: %.1f us (medians of 300 alternating steps)\n",
                which, sp * 1e6, d * 1e6);
    std::printf("bench embedding_sparse_update%s: %.1f us/step (%.2fx a 1,000-row dense update; "
                "target <= 2)\n",
                adagrad ? "_adagrad" : "", sp * 1e6, sp / d);
  }
}

/// Median seconds of `steps` training steps of the LSTM language model, after 3 warm-up steps.
double lstm_lm_step(runtime& rt, bench::lm_layers layers, int steps) {
  bench::lstm_lm_graph m({}, layers, "lm" + std::to_string(int(layers)) + "_");
  session s(rt, m.g);
  throw_if_error(s.run({global_variables_initializer(m.g)}));
  std::vector<double> times;
  for (int i = 0; i < 3 + steps; ++i) {
    double t0 = now();
    throw_if_error(s.run(m.feeds, {}, {m.train}).error());
    if (i >= 3)
      times.push_back(now() - t0);
  }
  return median(times);
}

void lstm_lm() {
  runtime rt;
  const int steps = 10;
  double blocks = lstm_lm_step(rt, bench::lm_layers::blocks, steps);
  double fused = lstm_lm_step(rt, bench::lm_layers::fused, steps);
  double unfused = lstm_lm_step(rt, bench::lm_layers::cells, steps);
  double torch = bench::run_peer("/usr/bin/python3 " RUNNEL_SOURCE_DIR
                                 "/bench/peers/lstm_lm_torch.py 2 " + std::to_string(steps),
                                 "lstm_lm_torch_step:");
  std::printf("lstm_lm_step: BlockLSTM per layer (dynamic_rnn) %.1f ms, LSTMBlockCell per layer and "
              "step (static_rnn) %.1f ms, unfused cells %.1f ms, PyTorch nn.LSTM %.1f ms "
              "(medians of %d steps, 2 threads each)\n",
              blocks * 1e3, fused * 1e3, unfused * 1e3, torch, steps);
  if (torch > 0)
    std::printf("bench lstm_lm_step: %.1f ms/step (%.2fx PyTorch nn.LSTM's step time; target <= "
                "1)\n",
                blocks * 1e3, blocks * 1e3 / torch);
  else
    std::printf("bench lstm_lm_step: %.1f ms/step (PyTorch not installed: no ratio)\n",
                blocks * 1e3);
}

} // namespace

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // OpenBLAS's own kernels, not its generic ones
  // Figures compare only within a run, and our machines of one kind differ: say which CPU this
  // is, and which library multiplies on it.
  std::printf("sequence_bench: %s; float32 products through %s\n",
              runnel::bench::cpu_description().c_str(), runnel::sgemm_library().c_str());
  const char* only = argc > 1 ? argv[1] : nullptr;
  auto want = [&](const char* name) { return !only || std::strcmp(only, name) == 0; };
  if (want("embedding_sparse_update"))
    embedding_sparse_update();
  if (want("lstm_lm_step"))
    lstm_lm();
  return 0;
}
