// NegTrain: TensorFlow's fused skip-gram update with negative sampling (what its optimized
// word2vec trains with). For each (example, label) pair, with v = w_in[example]:
//   g = σ(−v·w_out[label]);  w_out[label] += lr·g·v;  Δv = g·w_out[label]
//   k negatives n ~ count^0.75:  g = −σ(v·w_out[n]);  w_out[n] += lr·g·v;  Δv += g·w_out[n]
//   w_in[example] += lr·Δv
// It runs at w_in's variable actor with w_out locked, so it is serialised with every other
// update of the two tables. With num_threads > 1 (a Runnel attribute) the step's pairs are split
// over the CPU device's threads, which update the shared rows without locks ("Hogwild", as the
// original word2vec, gensim and TensorFlow's concurrent NegTrain steps do): a lost update costs
// SGD nothing, and the result is no longer bit-for-bit reproducible. The loss output is the mean
// over every 8th pair (logs are a fifth of the work otherwise).
#include <cmath>
#include <mutex>
#include <random>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/variable.hpp"

namespace runnel {
namespace {

class neg_train_kernel : public kernel {
public:
  neg_train_kernel(const kernel_construction& c, std::shared_ptr<variable> in,
                   std::shared_ptr<variable> out)
      : in_(std::move(in)), out_(std::move(out)),
        negatives_(c.attr<int64_t>("num_negative_samples")),
        threads_(std::max<int64_t>(1, c.attr<int64_t>("num_threads"))) {
    auto counts = c.attr<std::vector<int64_t>>("vocab_count");
    std::vector<double> weights;
    for (auto n : counts) {
      weights.push_back(std::pow(double(std::max<int64_t>(n, 0)), 0.75));
      total_ += weights.back();
    }
    build_alias(weights);
    state_ = uint64_t(counts.size()) * 0x9e3779b97f4a7c15ull + 1;
  }

  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("NegTrain is asynchronous"); }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    tensor examples = ctx.input(2), labels = ctx.input(3);
    if (examples.num_elements() != labels.num_elements()) {
      done(invalid_argument("NegTrain: " + std::to_string(examples.num_elements()) +
                            " examples but " + std::to_string(labels.num_elements()) + " labels"));
      return;
    }
    float lr = *ctx.input(4).data<float>();
    auto loss = std::make_shared<double>(0.0);
    auto* out_loss = &ctx.output(0);
    cpu_device* cpu = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    auto fn = [this, examples, labels, lr, loss, cpu](variable::state& in) -> status {
      if (!in.initialized)
        return failed_precondition("attempting to use uninitialized value " + in_->name());
      return out_->modify([&](variable::state& out) -> status {
        if (!out.initialized)
          return failed_precondition("attempting to use uninitialized value " + out_->name());
        if (in.value.rank() != 2 || !(in.value.shape() == out.value.shape()))
          return invalid_argument("NegTrain: w_in " + in.value.shape().to_string() + " and w_out " +
                                  out.value.shape().to_string() + " must be equal matrices");
        int64_t rows = in.value.dim(0), dim = in.value.dim(1);
        if (int64_t(alias_.size()) != rows || !(total_ > 0))
          return invalid_argument("NegTrain: vocab_count has " +
                                  std::to_string(alias_.size()) + " counts (sum of powers " +
                                  std::to_string(total_) + ") for tables of " +
                                  std::to_string(rows) + " rows");
        const int32_t* ex = examples.data<int32_t>();
        const int32_t* lb = labels.data<int32_t>();
        for (int64_t i = 0; i < examples.num_elements(); ++i)
          for (int32_t id : {ex[i], lb[i]})
            if (id < 0 || id >= rows)
              return invalid_argument("NegTrain: id " + std::to_string(id) + " (pair " +
                                      std::to_string(i) + ") is not in [0, " +
                                      std::to_string(rows) + ")");
        make_writable(in);
        make_writable(out);
        int64_t n = examples.num_elements();
        int64_t chunks = cpu && cpu->num_threads() > 0 ? std::min(threads_, n) : 1;
        std::vector<double> sums(static_cast<size_t>(std::max<int64_t>(chunks, 1)), 0.0);
        uint64_t base = next_random(state_);
        auto run = [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            uint64_t rng = base + uint64_t(c) * 0x9e3779b97f4a7c15ull;
            int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
            sums[size_t(c)] = train(in.value.data<float>(), out.value.data<float>(), ex + b,
                                    lb + b, e - b, dim, lr, rng);
          }
        };
        if (chunks > 1)
          cpu->parallel_for(chunks, 1, run);
        else if (n > 0)
          run(0, 1);
        double total = 0;
        for (double s : sums)
          total += s;
        *loss = total / double(std::max<int64_t>(1, (n + 7) / 8));
        return {};
      });
    };
    in_->update(std::move(fn), [loss, out_loss, done = std::move(done)](status st, tensor) {
      if (st.ok())
        *out_loss = tensor::scalar<float>(float(*loss));
      done(std::move(st));
    });
  }

private:
  /// Walker's alias method: a draw is one bucket and one coin, O(1) whatever the vocabulary.
  void build_alias(const std::vector<double>& w) {
    size_t n = w.size();
    accept_.assign(n, 1.0f);
    alias_.resize(n);
    std::vector<double> scaled(n);
    std::vector<uint32_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      alias_[i] = uint32_t(i);
      scaled[i] = total_ > 0 ? w[i] * double(n) / total_ : 1.0;
      (scaled[i] < 1.0 ? small : large).push_back(uint32_t(i));
    }
    while (!small.empty() && !large.empty()) {
      uint32_t s = small.back(), l = large.back();
      small.pop_back();
      accept_[s] = float(scaled[s]);
      alias_[s] = l;
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
  }

  static uint64_t next_random(uint64_t& state) { // a 64-bit LCG (Knuth's MMIX constants)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 11;
  }

  int64_t sample(uint64_t& state) const {
    uint64_t r = next_random(state);
    auto bucket = size_t((r >> 24) % alias_.size());
    float coin = float(r & 0xffffff) / float(1 << 24);
    return coin < accept_[bucket] ? int64_t(bucket) : int64_t(alias_[bucket]);
  }

  /// v·o with independent partial sums, so that the compiler vectorises it.
  static float dot(const float* v, const float* o, int64_t dim) {
    constexpr int lanes = 16;
    float acc[lanes] = {};
    int64_t k = 0;
    for (; k + lanes <= dim; k += lanes)
      for (int j = 0; j < lanes; ++j)
        acc[j] += v[k + j] * o[k + j];
    float x = 0;
    for (; k < dim; ++k)
      x += v[k] * o[k];
    for (float a : acc)
      x += a;
    return x;
  }

  /// Trains pairs [0, n); returns the sum of the losses of every 8th pair before its update.
  double train(float* w_in, float* w_out, const int32_t* ex, const int32_t* lb, int64_t n,
               int64_t dim, float lr, uint64_t& rng) const {
    std::vector<float> delta(static_cast<size_t>(dim));
    double loss = 0;
    bool measure = false;
    auto step = [&](float* v, float* o, float label) {
      float x = dot(v, o, dim);
      // d/dx of log σ(x) (label 1) or log σ(−x) (label 0): label − σ(x)
      float s = 1.0f / (1.0f + std::exp(-x));
      float g = label - s;
      if (measure)
        loss -= std::log(std::max(label > 0 ? s : 1.0f - s, 1e-7f));
      for (int64_t k = 0; k < dim; ++k) {
        delta[size_t(k)] += g * o[k];
        o[k] += lr * g * v[k];
      }
    };
    for (int64_t i = 0; i < n; ++i) {
      float* v = w_in + int64_t(ex[i]) * dim;
      measure = i % 8 == 0;
      std::fill(delta.begin(), delta.end(), 0.0f);
      step(v, w_out + int64_t(lb[i]) * dim, 1.0f);
      for (int64_t s = 0; s < negatives_; ++s) {
        int64_t neg = sample(rng);
        if (neg != lb[i])
          step(v, w_out + neg * dim, 0.0f);
      }
      for (int64_t k = 0; k < dim; ++k)
        v[k] += lr * delta[size_t(k)];
    }
    return loss;
  }

  std::shared_ptr<variable> in_, out_;
  int64_t negatives_, threads_;
  std::vector<float> accept_;    ///< alias method: keep the bucket with this probability
  std::vector<uint32_t> alias_;  ///< else take this one
  double total_ = 0;
  uint64_t state_; // the sampler's; used only inside the serialised update
};

} // namespace

RUNNEL_KERNEL_FAMILY(word2vec) {
  reg.add("NegTrain", device_type::cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto in, input_variable(c, 0));
            RUNNEL_ASSIGN_OR_RETURN(auto out, input_variable(c, 1));
            return std::unique_ptr<kernel>(
                std::make_unique<neg_train_kernel>(c, std::move(in), std::move(out)));
          });
}

} // namespace runnel
