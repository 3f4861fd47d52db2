#pragma once
// Optimizers extend the graph with gradient and update nodes, as TensorFlow's tf.train ones do.
//
//   auto step = variable(g, constant(g, int64_t(0)), "global_step", /*trainable=*/false);
//   adam_optimizer opt(0.001);
//   operation train = opt.minimize(loss, {}, &step);   // {} = every trainable variable
//   auto init = global_variables_initializer(g);        // after minimize: slots need init too
//   for (...) s.run({{x, batch}}, {loss}, {train});
//
// Updates run at each variable's actor, one at a time (ApplyAdam and friends). `global_step`
// is incremented once per applied step, after every variable's update.
//
// A variable whose gradient is indexed slices (it is read only through embedding lookups) is
// updated sparsely: only the rows looked up change (duplicates summed first). Gradient descent,
// Momentum, Adagrad and RMSProp do so as TensorFlow does (slots of rows not looked up keep their
// values); Adam keeps TensorFlow's dense semantics (every row's moments decay each step), and
// lazy_adam_optimizer updates only the rows seen.

#include <string>
#include <utility>
#include <vector>

#include "runnel/ops/grad/gradients.hpp"

namespace runnel {

/// A learning rate: a number, or a scalar tensor computed in the graph (a decay schedule).
struct learning_rate {
  learning_rate(double v) : value(v) {}
  learning_rate(output t) : tensor(t) {}
  double value = 0;
  output tensor;
  output as_output(graph& g, dtype t) const;
};

class optimizer {
public:
  virtual ~optimizer() = default;

  /// (gradient, variable ref) for each variable; variables the loss does not depend on are
  /// left out. `var_list` empty = the graph's "trainable_variables".
  std::vector<std::pair<gradient_value, output>>
  compute_gradients(output loss, std::vector<output> var_list = {});
  /// One update op per variable, grouped; then global_step += 1 when given.
  operation apply_gradients(const std::vector<std::pair<gradient_value, output>>& grads_and_vars,
                            const graph_variable* global_step = nullptr,
                            std::string_view name = {});
  operation minimize(output loss, std::vector<output> var_list = {},
                     const graph_variable* global_step = nullptr, std::string_view name = {});

  const std::string& name() const { return name_; }

protected:
  explicit optimizer(std::string name) : name_(std::move(name)) {}
  /// Creates shared state (e.g. Adam's beta powers) before the per-variable updates.
  virtual void prepare(graph&, dtype) {}
  /// The update of one variable.
  virtual output apply_one(graph& g, output var, output grad) = 0;
  /// The update of one variable's rows (by default: a dense update with the slices made dense).
  virtual output apply_sparse(graph& g, output var, const indexed_slices& grad) {
    return apply_one(g, var, gradient_value(grad).to_dense());
  }
  /// Ops that must run after every variable's update (e.g. advancing Adam's beta powers).
  virtual std::vector<operation> finish(graph&, const std::vector<operation>& updates) {
    return updates;
  }
  /// A zero-initialised (or `init`-initialised) non-trainable slot next to `var`.
  graph_variable slot(graph& g, output var, const std::string& slot_name, double init = 0.0);

private:
  std::string name_;
};

class gradient_descent_optimizer : public optimizer {
public:
  explicit gradient_descent_optimizer(learning_rate lr)
      : optimizer("GradientDescent"), lr_(std::move(lr)) {}

protected:
  output apply_one(graph& g, output var, output grad) override;
  output apply_sparse(graph& g, output var, const indexed_slices& grad) override;

private:
  learning_rate lr_;
};

class momentum_optimizer : public optimizer {
public:
  momentum_optimizer(learning_rate lr, double momentum, bool use_nesterov = false)
      : optimizer("Momentum"), lr_(std::move(lr)), momentum_(momentum), nesterov_(use_nesterov) {}

protected:
  output apply_one(graph& g, output var, output grad) override;
  output apply_sparse(graph& g, output var, const indexed_slices& grad) override;

private:
  learning_rate lr_;
  double momentum_;
  bool nesterov_;
};

class adagrad_optimizer : public optimizer {
public:
  explicit adagrad_optimizer(learning_rate lr, double initial_accumulator = 0.1)
      : optimizer("Adagrad"), lr_(std::move(lr)), initial_(initial_accumulator) {}

protected:
  output apply_one(graph& g, output var, output grad) override;
  output apply_sparse(graph& g, output var, const indexed_slices& grad) override;

private:
  learning_rate lr_;
  double initial_;
};

class rmsprop_optimizer : public optimizer {
public:
  explicit rmsprop_optimizer(learning_rate lr, double decay = 0.9, double momentum = 0.0,
                             double epsilon = 1e-10)
      : optimizer("RMSProp"), lr_(std::move(lr)), decay_(decay), momentum_(momentum),
        epsilon_(epsilon) {}

protected:
  output apply_one(graph& g, output var, output grad) override;
  output apply_sparse(graph& g, output var, const indexed_slices& grad) override;

private:
  learning_rate lr_;
  double decay_, momentum_, epsilon_;
};

class adam_optimizer : public optimizer {
public:
  explicit adam_optimizer(learning_rate lr = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                          double epsilon = 1e-8)
      : optimizer("Adam"), lr_(std::move(lr)), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

protected:
  void prepare(graph& g, dtype t) override;
  output apply_one(graph& g, output var, output grad) override;
  std::vector<operation> finish(graph& g, const std::vector<operation>& updates) override;
  /// ApplyAdam's or SparseApplyAdam's inputs after the variable and its slots.
  std::vector<endpoint> adam_inputs(graph& g, output var);

private:
  learning_rate lr_;
  double beta1_, beta2_, epsilon_;
  graph_variable beta1_power_, beta2_power_;
};

/// Adam that updates only the rows a sparse gradient names: their moments and values, with the
/// step's bias correction (TensorFlow's LazyAdamOptimizer). Dense gradients update as Adam does.
class lazy_adam_optimizer : public adam_optimizer {
public:
  using adam_optimizer::adam_optimizer;

protected:
  output apply_sparse(graph& g, output var, const indexed_slices& grad) override;
};

/// lr · rate^(step / decay_steps), the exponent floored when `staircase`.
output exponential_decay(double lr, const graph_variable& global_step, double decay_steps,
                         double decay_rate, bool staircase = false, dtype t = dtype::f32);
/// values[0] while step < boundaries[0], values[i] while step < boundaries[i], then the last.
output piecewise_constant(const graph_variable& global_step, const std::vector<int64_t>& boundaries,
                          const std::vector<double>& values, dtype t = dtype::f32);

} // namespace runnel
