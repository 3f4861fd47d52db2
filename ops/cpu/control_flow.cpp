// Kernels of the control-flow primitives. The executor routes Switch, Merge, Enter, Exit and
// NextIteration itself (deadness, frames, iterations: actors/exec/flow.cpp) and never calls these for
// them; they define what each op computes on live values, which is also what runs when such a
// node sits in a graph without frames.
#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

/// Switch on live inputs: the value goes to the output the predicate selects.
class switch_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& pred = ctx.input(1);
    if (pred.type() != dtype::boolean || pred.num_elements() != 1)
      return invalid_argument("the predicate must be a bool scalar, got " +
                              std::string(name(pred.type())) + pred.shape().to_string());
    ctx.set_output(*pred.data<bool>() ? 1 : 0, ctx.input(0));
    return {};
  }
};

/// Merge on live inputs: the first one.
class merge_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    ctx.set_output(0, ctx.input(0));
    ctx.set_output(1, tensor::scalar<int32_t>(0));
    return {};
  }
};

class control_trigger_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context&) override { return {}; }
};

} // namespace

RUNNEL_KERNEL_FAMILY(control_flow) {
  for (const char* op : {"Enter", "Exit", "NextIteration", "LoopCond"})
    reg.add(op, device_type::cpu, {}, make_simple_kernel<identity_kernel>);
  reg.add("Switch", device_type::cpu, {}, make_simple_kernel<switch_kernel>);
  reg.add("Merge", device_type::cpu, {}, make_simple_kernel<merge_kernel>);
  reg.add("ControlTrigger", device_type::cpu, {}, make_simple_kernel<control_trigger_kernel>);
}

} // namespace runnel
