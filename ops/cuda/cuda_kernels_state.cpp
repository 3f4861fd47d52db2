// CUDA kernels of the state, training and sparse families: variables that live in GPU memory
// (VariableV2), and the updates that change them in place there: Assign, AssignAdd, AssignSub
// (state), the optimizers' Apply* and SparseApply* (training), ScatterAdd/Sub/Update (sparse). As
// on the CPU, an update runs at its variable's actor, one at a time; it enqueues its kernel on the
// compute stream and the node completes as other GPU nodes do (cuda_device::finish). A buffer a
// reader still holds is copied on the device first (copy-on-write, as make_writable does on the
// host).
#include <algorithm>

#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/kernel/variable.hpp"

namespace runnel {
namespace {

/// VariableV2 on a GPU: the variable's current device buffer (when a consumer needs it).
class gpu_variable_kernel : public kernel {
public:
  gpu_variable_kernel(std::shared_ptr<variable> v, bool value_needed)
      : var_(std::move(v)), value_needed_(value_needed) {}
  status compute(kernel_context& ctx) override {
    if (!value_needed_)
      return {};
    RUNNEL_ASSIGN_OR_RETURN(tensor value, var_->read());
    ctx.set_output(0, std::move(value));
    return {};
  }
  bool accepts_device_inputs() const override { return true; }
  std::shared_ptr<variable> variable_resource() const override { return var_; }

private:
  std::shared_ptr<variable> var_;
  bool value_needed_;
};

/// Makes `s.value` a device buffer nobody else holds (copying it on the device, or onto it).
status make_writable_on_device(gpu_context& g, variable::state& s, const std::string& node) {
  if (s.value.host_readable()) {
    RUNNEL_ASSIGN_OR_RETURN(s.value, g.to_device(s.value, node));
    return {};
  }
  if (!s.value.is_unique()) {
    RUNNEL_ASSIGN_OR_RETURN(s.value, g.copy_on_device(s.value, node));
  }
  return {};
}

/// An update of a variable and its slot variables (the first `refs` inputs), run at the
/// variable's actor: `fn(gpu, states, inputs)` with the states locked, the variable's first.
class gpu_update_kernel : public kernel {
public:
  using update_fn = std::function<status(gpu_context&, std::vector<variable::state*>&,
                                         std::span<const tensor>)>;
  gpu_update_kernel(cuda_device& d, std::vector<std::shared_ptr<variable>> vars,
                    std::vector<slot_memory> slots, update_fn fn, std::string node)
      : d_(d), vars_(std::move(vars)), slots_(std::move(slots)), fn_(std::move(fn)),
        node_(std::move(node)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("GPU updates are asynchronous"); }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    gpu_context& g = d_.context();
    if (cudaError_t e = cudaSetDevice(g.device()); e != cudaSuccess)
      return done(cuda_status(e, "cudaSetDevice"));
    auto staged = std::make_shared<std::vector<tensor>>();
    {
      std::lock_guard lock(g.launch_mutex());
      if (status st = stage_inputs(g, ctx.inputs(), slots_, *staged); !st.ok())
        return done(st);
    }
    auto* out = ctx.outputs().empty() ? nullptr : &ctx.output(0); // _MultiApplyAdam has none
    vars_[0]->update(
        [this, staged](variable::state& vs) -> status {
          gpu_context& g = d_.context();
          RUNNEL_RETURN_IF_ERROR(cuda_status(cudaSetDevice(g.device()), "cudaSetDevice"));
          std::vector<variable::state*> states{&vs};
          // The slots are locked in order, inside the variable's update, as on the CPU.
          std::function<status(size_t)> with_slots = [&](size_t k) -> status {
            if (k == vars_.size()) {
              std::lock_guard lock(g.launch_mutex());
              return fn_(g, states, *staged);
            }
            auto& slot = *vars_[k];
            return slot.modify([&](variable::state& ss) -> status {
              if (!ss.initialized)
                return failed_precondition("attempting to use uninitialized value " +
                                           slot.name() +
                                           " (an optimizer slot: run the initializer after "
                                           "building the optimizer)");
              states.push_back(&ss);
              return with_slots(k + 1);
            });
          };
          return with_slots(1);
        },
        [this, out, staged, done = std::move(done)](status st, tensor value) mutable {
          if (!st.ok())
            return done(st);
          if (out)
            *out = std::move(value);
          d_.finish(staged, std::move(done));
        });
  }

private:
  cuda_device& d_;
  std::vector<std::shared_ptr<variable>> vars_; // the variable, then its slots
  std::vector<slot_memory> slots_;
  update_fn fn_;
  std::string node_;
};

result<std::unique_ptr<kernel>> make_update(const kernel_construction& c, cuda_device& d, int refs,
                                            std::vector<slot_memory> slots,
                                            gpu_update_kernel::update_fn fn) {
  std::vector<std::shared_ptr<variable>> vars;
  for (int i = 0; i < refs; ++i) {
    RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, i));
    vars.push_back(std::move(v));
  }
  return std::unique_ptr<kernel>(std::make_unique<gpu_update_kernel>(
      d, std::move(vars), std::move(slots), std::move(fn), c.node.name));
}

status require_initialized(const variable::state& s, const std::string& var) {
  if (!s.initialized)
    return failed_precondition("attempting to use uninitialized value " + var);
  return {};
}

struct apply_op {
  const char* op;
  gpu_apply_rule rule;
  int refs;                 ///< the variable and its slots
  std::vector<int> scalars; ///< input slots of the rule's scalars
  int grad;                 ///< input slot of the gradient
  int indices = -1;         ///< input slot of the indices (sparse forms)
};

} // namespace

/// Variables, their reads and assignments.
RUNNEL_CUDA_KERNEL_FAMILY(state) {
  t.emplace("VariableV2", [](const kernel_construction& c, cuda_device&) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto v, node_variable(c, c.node));
    bool needed = !c.output_value_needed.empty() && c.output_value_needed[0];
    return std::unique_ptr<kernel>(std::make_unique<gpu_variable_kernel>(std::move(v), needed));
  });
  t.emplace("Assign", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto var, input_variable(c, 0));
    bool validate = c.attr<bool>("validate_shape");
    return make_update(c, d, 1, {},
                       [var = var.get(), validate](gpu_context&, std::vector<variable::state*>& s,
                                                   std::span<const tensor> in) -> status {
                         const tensor& value = in[1];
                         if (value.type() != var->type())
                           return invalid_argument("value has dtype " +
                                                   std::string(name(value.type())) +
                                                   " but variable " + var->name() + " is " +
                                                   std::string(name(var->type())));
                         if (validate && !var->declared_shape().is_compatible_with(value.shape()))
                           return invalid_argument("cannot assign a value of shape " +
                                                   value.shape().to_string() + " to variable " +
                                                   var->name() + " of shape " +
                                                   var->declared_shape().to_string());
                         s[0]->value = value; // shared; later in-place updates copy first
                         s[0]->initialized = true;
                         return {};
                       });
  });
  for (auto [op, kind] :
       {std::pair{"AssignAdd", binary_op::Add}, std::pair{"AssignSub", binary_op::Sub}})
    t.emplace(op, [kind = kind](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
      RUNNEL_ASSIGN_OR_RETURN(auto var, input_variable(c, 0));
      return make_update(c, d, 1, {},
                         [var = var.get(), kind, node = c.node.name](
                             gpu_context& g, std::vector<variable::state*>& s,
                             std::span<const tensor> in) -> status {
                           RUNNEL_RETURN_IF_ERROR(require_initialized(*s[0], var->name()));
                           if (!(s[0]->value.shape() == in[1].shape()))
                             return invalid_argument("cannot update variable " + var->name() +
                                                     " of shape " + s[0]->value.shape().to_string() +
                                                     " with a value of shape " +
                                                     in[1].shape().to_string());
                           RUNNEL_RETURN_IF_ERROR(make_writable_on_device(g, *s[0], node));
                           tensor sum; // a new buffer: readers keep the old one
                           RUNNEL_RETURN_IF_ERROR(binary_cuda(g, kind, s[0]->value, in[1], &sum, node));
                           s[0]->value = std::move(sum);
                           return {};
                         });
    });
}

/// The optimizers' Apply* kernels, dense and sparse.
RUNNEL_CUDA_KERNEL_FAMILY_PART(training, apply) {
  // The optimizers: input slots as the CPU kernels read them (ops/cpu/training.cpp).
  static const std::vector<apply_op> applies{
      {"ApplyGradientDescent", gpu_apply_rule::gradient_descent, 1, {1}, 2},
      {"ApplyMomentum", gpu_apply_rule::momentum, 2, {2, 4}, 3},
      {"ApplyAdagrad", gpu_apply_rule::adagrad, 2, {2}, 3},
      {"ApplyRMSProp", gpu_apply_rule::rmsprop, 3, {3, 4, 5, 6}, 7},
      {"ApplyAdam", gpu_apply_rule::adam, 3, {3, 4, 5, 6, 7, 8}, 9},
      {"SparseApplyGradientDescent", gpu_apply_rule::gradient_descent, 1, {1}, 2, 3},
      {"SparseApplyMomentum", gpu_apply_rule::momentum, 2, {2, 5}, 3, 4},
      {"SparseApplyAdagrad", gpu_apply_rule::adagrad, 2, {2}, 3, 4},
      {"SparseApplyRMSProp", gpu_apply_rule::rmsprop, 3, {3, 4, 5, 6}, 7, 8},
      {"SparseApplyAdam", gpu_apply_rule::adam, 3, {3, 4, 5, 6, 7, 8}, 9, 10}};
  for (const apply_op& a : applies)
    t.emplace(a.op, [&a](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
      bool nesterov = c.node.attrs.count("use_nesterov") ? c.attr<bool>("use_nesterov") : false;
      // The indices are read on the host; the scalars (learning rate, decays, ...) wherever
      // they are: a host value is passed to the kernel as an argument, not copied to the GPU
      // each step.
      int last = std::max(a.grad, a.indices);
      for (int i : a.scalars)
        last = std::max(last, i);
      std::vector<slot_memory> slots(size_t(last) + 1, slot_memory::device);
      for (int i : a.scalars)
        slots[size_t(i)] = slot_memory::any;
      if (a.indices >= 0)
        slots[size_t(a.indices)] = slot_memory::host;
      std::vector<std::string> names;
      for (int i = 0; i < a.refs; ++i) {
        RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, i));
        names.push_back(v->name());
      }
      return make_update(
          c, d, a.refs, slots,
          [&a, nesterov, names, node = c.node.name](gpu_context& g,
                                                    std::vector<variable::state*>& s,
                                                    std::span<const tensor> in) -> status {
            for (size_t k = 0; k < s.size(); ++k) {
              RUNNEL_RETURN_IF_ERROR(require_initialized(*s[k], names[k]));
              if (k > 0 && !(s[k]->value.shape() == s[0]->value.shape()))
                return invalid_argument("slot " + names[k] + " has shape " +
                                        s[k]->value.shape().to_string() + " but variable " +
                                        names[0] + " has " + s[0]->value.shape().to_string());
              RUNNEL_RETURN_IF_ERROR(make_writable_on_device(g, *s[k], node));
            }
            std::vector<tensor> slot_values, scalars;
            for (size_t k = 1; k < s.size(); ++k)
              slot_values.push_back(s[k]->value);
            for (int i : a.scalars)
              scalars.push_back(in[size_t(i)]);
            if (a.indices < 0)
              return apply_cuda(g, a.rule, nesterov, s[0]->value, slot_values, scalars,
                                in[size_t(a.grad)], node, a.op);
            return sparse_apply_cuda(g, a.rule, nesterov, s[0]->value, slot_values, scalars,
                                     in[size_t(a.grad)], in[size_t(a.indices)], node, a.op);
          });
    });
}

/// The multi-tensor Adam.
RUNNEL_CUDA_KERNEL_FAMILY_PART(training, multi_adam) {
  // The graph optimizer's multi-tensor Adam (ops/optimize/multi_tensor.cpp): N variables, their
  // m and v (locked in that order, the variables by name), 6 shared scalars, N gradients.
  t.emplace("_MultiApplyAdam", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    size_t n = size_t(c.attr<int64_t>("N"));
    bool nesterov = c.attr<bool>("use_nesterov");
    std::vector<slot_memory> slots(4 * n + 6, slot_memory::device);
    for (size_t i = 3 * n; i < 3 * n + 6; ++i)
      slots[i] = slot_memory::any;
    std::vector<std::string> names;
    for (size_t i = 0; i < 3 * n; ++i) {
      RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, int(i)));
      names.push_back(v->name());
    }
    return make_update(
        c, d, int(3 * n), slots,
        [n, nesterov, names, node = c.node.name](gpu_context& g, std::vector<variable::state*>& s,
                                                 std::span<const tensor> in) -> status {
          std::vector<tensor> vars, grads;
          std::vector<std::vector<tensor>> moments(n);
          for (size_t k = 0; k < 3 * n; ++k) {
            RUNNEL_RETURN_IF_ERROR(require_initialized(*s[k], names[k]));
            RUNNEL_RETURN_IF_ERROR(make_writable_on_device(g, *s[k], node));
          }
          for (size_t k = 0; k < n; ++k) {
            vars.push_back(s[k]->value);
            moments[k] = {s[n + k]->value, s[2 * n + k]->value};
            grads.push_back(in[3 * n + 6 + k]);
          }
          return multi_apply_cuda(g, gpu_apply_rule::adam, nesterov, vars, moments,
                                  in.subspan(3 * n, 6), grads, node, "_MultiApplyAdam");
        });
  });
}

/// The scatter updates.
RUNNEL_CUDA_KERNEL_FAMILY(sparse) {
  for (auto [op, kind] : {std::pair{"ScatterAdd", gpu_scatter::add},
                          std::pair{"ScatterSub", gpu_scatter::sub},
                          std::pair{"ScatterUpdate", gpu_scatter::update}})
    t.emplace(op, [op = op, kind = kind](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
      RUNNEL_ASSIGN_OR_RETURN(auto var, input_variable(c, 0));
      return make_update(c, d, 1, {slot_memory::device, slot_memory::host},
                         [var = var.get(), op, kind, node = c.node.name](
                             gpu_context& g, std::vector<variable::state*>& s,
                             std::span<const tensor> in) -> status {
                           RUNNEL_RETURN_IF_ERROR(require_initialized(*s[0], var->name()));
                           RUNNEL_RETURN_IF_ERROR(make_writable_on_device(g, *s[0], node));
                           return scatter_cuda(g, kind, s[0]->value, in[1], in[2], node, op);
                         });
    });
}

} // namespace runnel
