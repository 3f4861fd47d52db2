// Optimizer update kernels: ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp,
// ApplyAdam. Each is an asynchronous kernel: the update runs at the variable's actor, one at a
// time; slot variables (accumulators, moments) are updated inside it under their own locks.
#include <cmath>

#include "ops/cpu/kernels.hpp"
#include "ops/variable.hpp"

namespace runnel {
namespace {

enum class rule { gradient_descent, momentum, adagrad, rmsprop, adam };

/// Scalars and the gradient of one update, in f64 for the scalars.
struct update_args {
  std::vector<double> scalars;
  tensor grad;
};

template <class T>
void apply_rule(rule r, bool nesterov, T* var, const std::vector<T*>& slots,
                const std::vector<double>& s, const T* g, int64_t n) {
  switch (r) {
    case rule::gradient_descent: {
      T alpha = T(s[0]);
      for (int64_t i = 0; i < n; ++i)
        var[i] -= alpha * g[i];
      break;
    }
    case rule::momentum: {
      T lr = T(s[0]), mu = T(s[1]);
      T* acc = slots[0];
      for (int64_t i = 0; i < n; ++i) {
        acc[i] = acc[i] * mu + g[i];
        var[i] -= nesterov ? lr * g[i] + lr * mu * acc[i] : lr * acc[i];
      }
      break;
    }
    case rule::adagrad: {
      T lr = T(s[0]);
      T* acc = slots[0];
      for (int64_t i = 0; i < n; ++i) {
        acc[i] += g[i] * g[i];
        var[i] -= lr * g[i] / std::sqrt(acc[i]);
      }
      break;
    }
    case rule::rmsprop: {
      T lr = T(s[0]), rho = T(s[1]), mu = T(s[2]), eps = T(s[3]);
      T *ms = slots[0], *mom = slots[1];
      for (int64_t i = 0; i < n; ++i) {
        ms[i] = rho * ms[i] + (T(1) - rho) * g[i] * g[i];
        mom[i] = mu * mom[i] + lr * g[i] / std::sqrt(ms[i] + eps);
        var[i] -= mom[i];
      }
      break;
    }
    case rule::adam: {
      double b1p = s[0], b2p = s[1];
      T lr = T(s[2]), b1 = T(s[3]), b2 = T(s[4]), eps = T(s[5]);
      T lr_t = T(double(lr) * std::sqrt(1 - b2p) / (1 - b1p));
      T *m = slots[0], *v = slots[1];
      for (int64_t i = 0; i < n; ++i) {
        m[i] += (g[i] - m[i]) * (T(1) - b1);
        v[i] += (g[i] * g[i] - v[i]) * (T(1) - b2);
        T step = nesterov ? m[i] * b1 + (T(1) - b1) * g[i] : m[i];
        var[i] -= lr_t * step / (std::sqrt(v[i]) + eps);
      }
      break;
    }
  }
}

class apply_kernel : public kernel {
public:
  apply_kernel(rule r, bool nesterov, std::vector<std::shared_ptr<variable>> vars,
               std::vector<int> scalar_inputs, int grad_input)
      : rule_(r), nesterov_(nesterov), vars_(std::move(vars)),
        scalar_inputs_(std::move(scalar_inputs)), grad_input_(grad_input) {}

  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("apply kernels are async"); }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    update_args args;
    for (int i : scalar_inputs_) {
      const tensor& t = ctx.input(i);
      if (t.num_elements() != 1) {
        done(invalid_argument("input " + std::to_string(i) + " must be a scalar, got shape " +
                              t.shape().to_string()));
        return;
      }
      args.scalars.push_back(element_as_double(t, 0));
    }
    args.grad = ctx.input(grad_input_);
    auto* out = &ctx.output(0);
    auto fn = [this, args](variable::state& vs) -> status {
      auto& var = *vars_[0];
      if (!vs.initialized)
        return failed_precondition("attempting to use uninitialized value " + var.name());
      if (!(vs.value.shape() == args.grad.shape()))
        return invalid_argument("variable " + var.name() + " has shape " +
                                vs.value.shape().to_string() + " but the gradient has shape " +
                                args.grad.shape().to_string());
      if (vs.value.type() != args.grad.type())
        return invalid_argument("variable " + var.name() + " is " +
                                std::string(name(vs.value.type())) + " but the gradient is " +
                                std::string(name(args.grad.type())));
      make_writable(vs);
      // Lock the slots in order, then update everything in one pass.
      std::vector<variable::state*> slot_states;
      std::function<status(size_t)> with_slots = [&](size_t k) -> status {
        if (k == vars_.size()) {
          int64_t n = vs.value.num_elements();
          if (vs.value.type() == dtype::f64) {
            std::vector<double*> slots;
            for (auto* st : slot_states)
              slots.push_back(st->value.data<double>());
            apply_rule<double>(rule_, nesterov_, vs.value.data<double>(), slots, args.scalars,
                               args.grad.data<double>(), n);
          } else {
            std::vector<float*> slots;
            for (auto* st : slot_states)
              slots.push_back(st->value.data<float>());
            apply_rule<float>(rule_, nesterov_, vs.value.data<float>(), slots, args.scalars,
                              args.grad.data<float>(), n);
          }
          return {};
        }
        auto& slot = *vars_[k];
        return slot.modify([&](variable::state& ss) -> status {
          if (!ss.initialized)
            return failed_precondition("attempting to use uninitialized value " + slot.name() +
                                       " (an optimizer slot: run the initializer after "
                                       "building the optimizer)");
          if (!(ss.value.shape() == vs.value.shape()))
            return invalid_argument("slot " + slot.name() + " has shape " +
                                    ss.value.shape().to_string() + " but variable " + var.name() +
                                    " has " + vs.value.shape().to_string());
          make_writable(ss);
          slot_states.push_back(&ss);
          return with_slots(k + 1);
        });
      };
      return with_slots(1);
    };
    vars_[0]->update(std::move(fn), [out, done = std::move(done)](status st, tensor v) {
      if (st.ok())
        *out = std::move(v);
      done(std::move(st));
    });
  }

private:
  rule rule_;
  bool nesterov_;
  std::vector<std::shared_ptr<variable>> vars_; // the variable, then its slots
  std::vector<int> scalar_inputs_;
  int grad_input_;
};

kernel_factory apply_factory(rule r, int refs, std::vector<int> scalars, int grad) {
  return [=](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    std::vector<std::shared_ptr<variable>> vars;
    for (int i = 0; i < refs; ++i) {
      RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, i));
      vars.push_back(std::move(v));
    }
    bool nesterov = c.node.attrs.count("use_nesterov") ? c.attr<bool>("use_nesterov") : false;
    return std::unique_ptr<kernel>(
        std::make_unique<apply_kernel>(r, nesterov, std::move(vars), scalars, grad));
  };
}

} // namespace

void register_training_kernels(kernel_registry& reg) {
  const std::vector<dtype> reals{dtype::f32, dtype::f64};
  auto cpu = device_type::cpu;
  reg.add("ApplyGradientDescent", cpu, reals, apply_factory(rule::gradient_descent, 1, {1}, 2));
  reg.add("ApplyMomentum", cpu, reals, apply_factory(rule::momentum, 2, {2, 4}, 3));
  reg.add("ApplyAdagrad", cpu, reals, apply_factory(rule::adagrad, 2, {2}, 3));
  reg.add("ApplyRMSProp", cpu, reals, apply_factory(rule::rmsprop, 3, {3, 4, 5, 6}, 7));
  reg.add("ApplyAdam", cpu, reals, apply_factory(rule::adam, 3, {3, 4, 5, 6, 7, 8}, 9));
}

} // namespace runnel
