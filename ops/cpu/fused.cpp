// The graph optimizer's fused kernels (ops/optimize/remap.cpp): _FusedMatMul and _FusedConv2D
// run the MatMul or Conv2D kernel, then add the bias and apply the activation in one pass over
// the product while it is still in cache, block by block on the device's pool: one firing and
// one pass over memory instead of three.
#include <optional>
#include <type_traits>

#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"

namespace runnel {
namespace {

/// y[r, c] = act(y[r, c] + bias[c]) over rows [r0, r1), act one of fused_activations
/// (ops/core/unary_ops.hpp) through its row's functor, or none.
template <class T>
void bias_activation(T* y, const T* bias, int64_t r0, int64_t r1, int64_t channels,
                     std::optional<unary_op> act) {
  if (!act) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < channels; ++c)
        y[r * channels + c] += bias[c];
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    // Tanh, Sigmoid and Elu one element at a time cost ~12 ns each (the C library's scalar
    // functions): add the bias, then apply the row's vectorised form to the block, still cached.
    if (*act != unary_op::Relu && *act != unary_op::Relu6) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < channels; ++c)
          y[r * channels + c] += bias[c];
      float* block = y + r0 * channels;
      unary_f32(*act, block, block, (r1 - r0) * channels);
      return;
    }
  }
  visit_unary(*act, [&]<class F>() {
    for (int64_t r = r0; r < r1; ++r) {
      T* row = y + r * channels;
      for (int64_t c = 0; c < channels; ++c)
        row[c] = F::apply(T(row[c] + bias[c]));
    }
  });
}

class fused_bias_kernel : public kernel {
public:
  fused_bias_kernel(std::unique_ptr<kernel> inner, std::optional<unary_op> act)
      : inner_(std::move(inner)), act_(act) {}

  status compute(kernel_context& ctx) override {
    const tensor& bias = ctx.input(2);
    kernel_context base(ctx.inputs().first(2), 1, ctx.has_cpu() ? &ctx.cpu() : nullptr);
    base.set_step_id(ctx.step_id());
    RUNNEL_RETURN_IF_ERROR(inner_->compute(base));
    tensor y = std::move(base.output(0));
    int64_t channels = y.shape().rank() > 0 ? y.dim(y.shape().rank() - 1) : 1;
    if (bias.shape().rank() != 1 || bias.dim(0) != channels)
      return invalid_argument("bias " + bias.shape().to_string() + " must be a vector of the " +
                              std::to_string(channels) + " channels of the output " +
                              y.shape().to_string());
    int64_t rows = channels == 0 ? 0 : y.num_elements() / channels;
    auto run = [&](auto* data, auto* b) {
      auto block = [&](int64_t r0, int64_t r1) {
        bias_activation(data, b, r0, r1, channels, act_);
      };
      int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, channels));
      if (ctx.has_cpu())
        ctx.cpu().parallel_for(rows, grain, block);
      else
        block(0, rows);
    };
    if (y.type() == dtype::f32)
      run(y.data<float>(), bias.data<float>());
    else if (y.type() == dtype::f64)
      run(y.data<double>(), bias.data<double>());
    else
      return unimplemented("fused bias and activation for " + std::string(name(y.type())));
    ctx.set_output(0, std::move(y));
    return {};
  }

private:
  std::unique_ptr<kernel> inner_;
  std::optional<unary_op> act_;
};

/// The factory of `fused_op`: the kernel of `base_op` for the node without its bias, wrapped.
kernel_factory fused_factory(const kernel_registry& reg, std::string base_op) {
  return [&reg, base_op](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    node base = c.node;
    base.op = base_op;
    base.def = c.graph.ops().find(base_op);
    base.inputs.resize(2);
    base.attrs.erase("activation");
    RUNNEL_ASSIGN_OR_RETURN(auto factory, reg.find(base, device_type::cpu));
    kernel_construction bc{base, c.graph, c.device, c.cpu, c.resources, c.output_value_needed,
                           c.gpu};
    RUNNEL_ASSIGN_OR_RETURN(auto inner, (*factory)(bc));
    auto name = c.attr<std::string>("activation");
    std::optional<unary_op> act;
    if (!name.empty()) {
      auto* row = find_fused_activation(name);
      if (!row) // the op definition checks this too
        return invalid_argument("unknown activation '" + name + "'");
      act = row->op;
    }
    return std::unique_ptr<kernel>(std::make_unique<fused_bias_kernel>(std::move(inner), act));
  };
}

} // namespace

// The wrapped kernel is looked up when a node is built, so the families' order does not matter.
RUNNEL_KERNEL_FAMILY_PART(math, fused_matmul) {
  reg.add("_FusedMatMul", device_type::cpu, {dtype::f32, dtype::f64}, fused_factory(reg, "MatMul"));
}
RUNNEL_KERNEL_FAMILY_PART(conv, fused) {
  reg.add("_FusedConv2D", device_type::cpu, {dtype::f32}, fused_factory(reg, "Conv2D"));
}

} // namespace runnel
