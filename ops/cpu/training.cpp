// Optimizer update kernels: ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp,
// ApplyAdam, and their SparseApply* forms (the same rules on the rows at given indices). Each is
// an asynchronous kernel: the update runs at the variable's actor, one at a time; slot variables
// (accumulators, moments) are updated inside it under their own locks.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runnel/ops/cpu/adam_dense.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/variable.hpp"

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
      if constexpr (std::is_same_v<T, float>) // vectorized, the same bits as the loop below
        return adam_dense_f32(var, m, v, g, n, lr_t, b1, b2, eps, nesterov);
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

/// Sums the rows of duplicate indices (the non-linear updates must see each row once), leaving
/// `idx` sorted and unique and `rows` pointing at `merged`; leaves unique sorted indices alone.
template <class T>
void merge_duplicates(std::vector<int64_t>& idx, const T*& rows, std::vector<T>& merged,
                      int64_t row_size) {
  if (std::is_sorted(idx.begin(), idx.end()) &&
      std::adjacent_find(idx.begin(), idx.end()) == idx.end())
    return;
  std::vector<size_t> order(idx.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return idx[a] < idx[b]; });
  std::vector<int64_t> unique;
  merged.clear();
  for (size_t k = 0; k < order.size(); ++k) {
    const T* row = rows + int64_t(order[k]) * row_size;
    if (!unique.empty() && unique.back() == idx[order[k]]) {
      T* dst = merged.data() + merged.size() - size_t(row_size);
      for (int64_t j = 0; j < row_size; ++j)
        dst[j] += row[j];
    } else {
      unique.push_back(idx[order[k]]);
      merged.insert(merged.end(), row, row + row_size);
    }
  }
  idx = std::move(unique);
  rows = merged.data();
}

/// Locks vars[from], vars[from + 1], ... each inside the last (an update holds its variable's own
/// lock already; slots are locked after it, in order), appending their states to `states`, then
/// runs `fn` with all of them held.
status with_locked(const std::vector<std::shared_ptr<variable>>& vars, size_t from,
                   std::vector<variable::state*>& states, const std::function<status()>& fn) {
  if (from == vars.size())
    return fn();
  return vars[from]->modify([&](variable::state& s) -> status {
    states.push_back(&s);
    return with_locked(vars, from + 1, states, fn);
  });
}

/// Apply* (dense: the gradient has the variable's shape) and SparseApply* (the gradient is rows
/// of the variable, at `indices`; only those rows of the variable and its slots change).
class apply_kernel : public kernel {
public:
  apply_kernel(rule r, bool nesterov, std::vector<std::shared_ptr<variable>> vars,
               std::vector<int> scalar_inputs, int grad_input, int indices_input)
      : rule_(r), nesterov_(nesterov), vars_(std::move(vars)),
        scalar_inputs_(std::move(scalar_inputs)), grad_input_(grad_input),
        indices_input_(indices_input) {}

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
    std::vector<int64_t> indices;
    if (indices_input_ >= 0) {
      const tensor& idx = ctx.input(indices_input_);
      if (idx.rank() != 1 || args.grad.rank() < 1 || args.grad.dim(0) != idx.dim(0)) {
        done(invalid_argument("indices must be a vector with one entry per gradient row, got "
                              "indices " + idx.shape().to_string() + " for a gradient " +
                              args.grad.shape().to_string()));
        return;
      }
      auto v = to_int64_vector(idx);
      if (!v.ok()) {
        done(v.error());
        return;
      }
      indices = std::move(v).value();
    }
    auto* out = &ctx.output(0);
    auto fn = [this, args, indices = std::move(indices)](variable::state& vs) mutable -> status {
      auto& var = *vars_[0];
      if (!vs.initialized)
        return failed_precondition("attempting to use uninitialized value " + var.name());
      RUNNEL_RETURN_IF_ERROR(check_gradient(var, vs.value, args.grad));
      make_writable(vs);
      // Lock the slots in order, then update everything in one pass.
      std::vector<variable::state*> slot_states;
      return with_locked(vars_, 1, slot_states, [&]() -> status {
        for (size_t k = 0; k < slot_states.size(); ++k) {
          variable::state& ss = *slot_states[k];
          const variable& slot = *vars_[k + 1];
          if (!ss.initialized)
            return failed_precondition("attempting to use uninitialized value " + slot.name() +
                                       " (an optimizer slot: run the initializer after "
                                       "building the optimizer)");
          if (!(ss.value.shape() == vs.value.shape()))
            return invalid_argument("slot " + slot.name() + " has shape " +
                                    ss.value.shape().to_string() + " but variable " + var.name() +
                                    " has " + vs.value.shape().to_string());
          make_writable(ss);
        }
        if (vs.value.type() == dtype::f64)
          return update<double>(vs, slot_states, args, indices);
        return update<float>(vs, slot_states, args, indices);
      });
    };
    vars_[0]->update(std::move(fn), output_new_value(out, std::move(done)));
  }

private:
  status check_gradient(const variable& var, const tensor& value, const tensor& grad) const {
    if (value.type() != grad.type())
      return invalid_argument("variable " + var.name() + " is " + std::string(name(value.type())) +
                              " but the gradient is " + std::string(name(grad.type())));
    bool fits = value.shape() == grad.shape();
    if (indices_input_ >= 0) {
      fits = value.rank() >= 1 && grad.rank() == value.rank();
      for (int d = 1; fits && d < value.rank(); ++d)
        fits = value.dim(d) == grad.dim(d);
    }
    if (!fits)
      return invalid_argument("variable " + var.name() + " has shape " +
                              value.shape().to_string() + " but the gradient has shape " +
                              grad.shape().to_string() +
                              (indices_input_ >= 0 ? " (rows of the variable expected)" : ""));
    return {};
  }

  template <class T>
  status update(variable::state& vs, const std::vector<variable::state*>& slot_states,
                const update_args& args, std::vector<int64_t>& indices) const {
    std::vector<T*> slots;
    for (auto* st : slot_states)
      slots.push_back(st->value.data<T>());
    T* var = vs.value.data<T>();
    const T* grad = args.grad.data<T>();
    if (indices_input_ < 0) {
      apply_rule<T>(rule_, nesterov_, var, slots, args.scalars, grad, vs.value.num_elements());
      return {};
    }
    int64_t row = vs.value.dim(0) == 0 ? 0 : vs.value.num_elements() / vs.value.dim(0);
    RUNNEL_RETURN_IF_ERROR(check_rows(indices, vs.value.dim(0), vars_[0]->name()));
    std::vector<T> merged;
    // Gradient descent is linear in the gradient: duplicate rows may apply one after another.
    if (rule_ != rule::gradient_descent)
      merge_duplicates<T>(indices, grad, merged, row);
    std::vector<T*> row_slots(slots.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      if (k + prefetch_rows < indices.size()) {
        int64_t ahead = indices[k + prefetch_rows] * row;
        prefetch_bytes(var + ahead, size_t(row) * sizeof(T), true);
        for (auto* s : slots)
          prefetch_bytes(s + ahead, size_t(row) * sizeof(T), true);
      }
      int64_t at = indices[k] * row;
      for (size_t s = 0; s < slots.size(); ++s)
        row_slots[s] = slots[s] + at;
      apply_rule<T>(rule_, nesterov_, var + at, row_slots, args.scalars, grad + int64_t(k) * row,
                    row);
    }
    return {};
  }

  rule rule_;
  bool nesterov_;
  std::vector<std::shared_ptr<variable>> vars_; // the variable, then its slots
  std::vector<int> scalar_inputs_;
  int grad_input_, indices_input_;
};

/// _MultiApplyAdam: ApplyAdam on each of N variables with the scalars they share, as one update
/// at the first variable's actor; the other variables and every slot are locked inside it in
/// input order (the graph optimizer orders the variables by name). The simulated GPU runs it.
class multi_adam_kernel : public kernel {
public:
  multi_adam_kernel(bool nesterov, std::vector<std::shared_ptr<variable>> vars)
      : nesterov_(nesterov), vars_(std::move(vars)), n_(vars_.size() / 3) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("apply kernels are async"); }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    std::vector<double> scalars;
    for (size_t i = 0; i < 6; ++i) {
      const tensor& t = ctx.input(int(3 * n_ + i));
      if (t.num_elements() != 1)
        return done(invalid_argument("input " + std::to_string(3 * n_ + i) +
                                     " must be a scalar, got shape " + t.shape().to_string()));
      scalars.push_back(element_as_double(t, 0));
    }
    std::vector<tensor> grads;
    for (size_t k = 0; k < n_; ++k)
      grads.push_back(ctx.input(int(3 * n_ + 6 + k)));
    auto fn = [this, scalars, grads](variable::state& first) -> status {
      std::vector<variable::state*> states{&first};
      return with_locked(vars_, 1, states, [&] { return apply_all(states, scalars, grads); });
    };
    vars_[0]->update(std::move(fn), [done = std::move(done)](status st, tensor) { done(st); });
  }

private:
  status apply_all(const std::vector<variable::state*>& s, const std::vector<double>& scalars,
                   const std::vector<tensor>& grads) const {
    for (size_t i = 0; i < vars_.size(); ++i)
      if (!s[i]->initialized)
        return failed_precondition("attempting to use uninitialized value " + vars_[i]->name());
    for (size_t k = 0; k < n_; ++k) {
      const tensor& value = s[k]->value;
      const tensor& g = grads[k];
      if (value.type() != g.type() || !(value.shape() == g.shape()))
        return invalid_argument("variable " + vars_[k]->name() + " is " +
                                std::string(name(value.type())) + value.shape().to_string() +
                                " but its gradient is " + std::string(name(g.type())) +
                                g.shape().to_string());
      for (size_t slot : {n_ + k, 2 * n_ + k})
        if (!(s[slot]->value.shape() == value.shape()))
          return invalid_argument("slot " + vars_[slot]->name() + " has shape " +
                                  s[slot]->value.shape().to_string() + " but variable " +
                                  vars_[k]->name() + " has " + value.shape().to_string());
    }
    for (size_t k = 0; k < n_; ++k) {
      variable::state &var = *s[k], &m = *s[n_ + k], &v = *s[2 * n_ + k];
      make_writable(var);
      make_writable(m);
      make_writable(v);
      if (var.value.type() == dtype::f64)
        apply_rule<double>(rule::adam, nesterov_, var.value.data<double>(),
                           {m.value.data<double>(), v.value.data<double>()}, scalars,
                           grads[k].data<double>(), var.value.num_elements());
      else
        apply_rule<float>(rule::adam, nesterov_, var.value.data<float>(),
                          {m.value.data<float>(), v.value.data<float>()}, scalars,
                          grads[k].data<float>(), var.value.num_elements());
    }
    return {};
  }

  bool nesterov_;
  std::vector<std::shared_ptr<variable>> vars_; // the variables, then their m, then their v
  size_t n_;
};

kernel_factory apply_factory(rule r, int refs, std::vector<int> scalars, int grad,
                             int indices = -1) {
  return [=](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    std::vector<std::shared_ptr<variable>> vars;
    for (int i = 0; i < refs; ++i) {
      RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, i));
      vars.push_back(std::move(v));
    }
    bool nesterov = c.node.attrs.count("use_nesterov") ? c.attr<bool>("use_nesterov") : false;
    return std::unique_ptr<kernel>(
        std::make_unique<apply_kernel>(r, nesterov, std::move(vars), scalars, grad, indices));
  };
}

} // namespace

RUNNEL_KERNEL_FAMILY(training) {
  const std::vector<dtype> reals{dtype::f32, dtype::f64};
  auto cpu = device_type::cpu;
  reg.add("ApplyGradientDescent", cpu, reals, apply_factory(rule::gradient_descent, 1, {1}, 2));
  reg.add("ApplyMomentum", cpu, reals, apply_factory(rule::momentum, 2, {2, 4}, 3));
  reg.add("ApplyAdagrad", cpu, reals, apply_factory(rule::adagrad, 2, {2}, 3));
  reg.add("ApplyRMSProp", cpu, reals, apply_factory(rule::rmsprop, 3, {3, 4, 5, 6}, 7));
  reg.add("ApplyAdam", cpu, reals, apply_factory(rule::adam, 3, {3, 4, 5, 6, 7, 8}, 9));
  // Sparse forms: the same rules on the rows at `indices` (duplicates summed first).
  reg.add("SparseApplyGradientDescent", cpu, reals,
          apply_factory(rule::gradient_descent, 1, {1}, 2, 3));
  reg.add("SparseApplyMomentum", cpu, reals, apply_factory(rule::momentum, 2, {2, 5}, 3, 4));
  reg.add("SparseApplyAdagrad", cpu, reals, apply_factory(rule::adagrad, 2, {2}, 3, 4));
  reg.add("SparseApplyRMSProp", cpu, reals,
          apply_factory(rule::rmsprop, 3, {3, 4, 5, 6}, 7, 8));
  reg.add("SparseApplyAdam", cpu, reals,
          apply_factory(rule::adam, 3, {3, 4, 5, 6, 7, 8}, 9, 10));
  reg.add("_MultiApplyAdam", cpu, reals, [](const kernel_construction& c)
                                             -> result<std::unique_ptr<kernel>> {
    int64_t n = c.attr<int64_t>("N");
    std::vector<std::shared_ptr<variable>> vars;
    for (int i = 0; i < 3 * n; ++i) {
      RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, i));
      vars.push_back(std::move(v));
    }
    return std::unique_ptr<kernel>(
        std::make_unique<multi_adam_kernel>(c.attr<bool>("use_nesterov"), std::move(vars)));
  });
}

} // namespace runnel
