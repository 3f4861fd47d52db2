// Kernels of the TensorArrayV3 and StackV2 families: thin wrappers over the step's resources
// (ops/kernel/step_resources.hpp), which hold the logic and the locking.
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/step_resources.hpp"

namespace runnel {
namespace {

result<step_resources*> container(kernel_context& ctx) {
  if (!ctx.step_container())
    return failed_precondition("TensorArrays and Stacks need a step (run them in a session)");
  return ctx.step_container();
}

result<std::shared_ptr<tensor_array_resource>> array_input(kernel_context& ctx) {
  RUNNEL_ASSIGN_OR_RETURN(auto* c, container(ctx));
  const tensor& h = ctx.input(0);
  if (h.type() != dtype::string || h.num_elements() != 1)
    return invalid_argument("a TensorArray handle must be a string scalar");
  return c->array(*h.data<std::string>());
}

result<int32_t> scalar_index(const tensor& t) {
  if (t.num_elements() != 1)
    return invalid_argument("the index must be a scalar, got shape " + t.shape().to_string());
  return *t.data<int32_t>();
}

void set_flow(kernel_context& ctx, int out) {
  ctx.set_output(out, tensor::scalar<float>(0.0f));
}

class tensor_array_kernel : public kernel {
public:
  explicit tensor_array_kernel(const kernel_construction& c) : node_(c.node.name) {
    opts_.type = c.attr<dtype>("dtype");
    opts_.element_shape = c.attr<shape>("element_shape");
    opts_.dynamic_size = c.attr<bool>("dynamic_size");
    opts_.clear_after_read = c.attr<bool>("clear_after_read");
    opts_.identical_element_shapes = c.attr<bool>("identical_element_shapes");
  }
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto* c, container(ctx));
    RUNNEL_ASSIGN_OR_RETURN(int32_t size, scalar_index(ctx.input(0)));
    if (size < 0)
      return invalid_argument("TensorArray size must be >= 0, got " + std::to_string(size));
    std::string handle = c->new_handle(node_);
    c->add_array(handle, std::make_shared<tensor_array_resource>(handle, size, opts_));
    ctx.set_output(0, tensor::scalar<std::string>(handle));
    set_flow(ctx, 1);
    return {};
  }

private:
  std::string node_;
  tensor_array_resource::options opts_;
};

class tensor_array_grad_kernel : public kernel {
public:
  explicit tensor_array_grad_kernel(const kernel_construction& c)
      : source_(c.attr<std::string>("source")) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    auto g = ta->grad(source_);
    ctx.step_container()->add_array(g->name(), g);
    ctx.set_output(0, tensor::scalar<std::string>(g->name()));
    set_flow(ctx, 1);
    return {};
  }

private:
  std::string source_;
};

class write_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    RUNNEL_ASSIGN_OR_RETURN(int32_t index, scalar_index(ctx.input(1)));
    RUNNEL_RETURN_IF_ERROR(ta->write(index, ctx.input(2)));
    set_flow(ctx, 0);
    return {};
  }
};

class read_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    RUNNEL_ASSIGN_OR_RETURN(int32_t index, scalar_index(ctx.input(1)));
    RUNNEL_ASSIGN_OR_RETURN(auto value, ta->read(index));
    ctx.set_output(0, std::move(value));
    return {};
  }
};

class gather_kernel : public kernel {
public:
  explicit gather_kernel(const kernel_construction& c)
      : element_shape_(c.attr<shape>("element_shape")) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    const tensor& indices = ctx.input(1);
    if (indices.rank() != 1)
      return invalid_argument("gather indices must be a vector, got " +
                              indices.shape().to_string());
    RUNNEL_ASSIGN_OR_RETURN(auto value, ta->gather(indices.flat<int32_t>(), element_shape_));
    ctx.set_output(0, std::move(value));
    return {};
  }

private:
  shape element_shape_;
};

class scatter_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    const tensor& indices = ctx.input(1);
    if (indices.rank() != 1)
      return invalid_argument("scatter indices must be a vector, got " +
                              indices.shape().to_string());
    RUNNEL_RETURN_IF_ERROR(ta->scatter(indices.flat<int32_t>(), ctx.input(2)));
    set_flow(ctx, 0);
    return {};
  }
};

class concat_kernel : public kernel {
public:
  explicit concat_kernel(const kernel_construction& c)
      : except0_(c.attr<shape>("element_shape_except0")) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    RUNNEL_ASSIGN_OR_RETURN(auto out, ta->concat(except0_));
    ctx.set_output(0, std::move(out.first));
    ctx.set_output(1, std::move(out.second));
    return {};
  }

private:
  shape except0_;
};

class split_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    const tensor& lengths = ctx.input(2);
    if (lengths.rank() != 1)
      return invalid_argument("split lengths must be a vector, got " +
                              lengths.shape().to_string());
    RUNNEL_RETURN_IF_ERROR(ta->split(ctx.input(1), lengths.flat<int64_t>()));
    set_flow(ctx, 0);
    return {};
  }
};

class size_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    ctx.set_output(0, tensor::scalar<int32_t>(int32_t(ta->size())));
    return {};
  }
};

class close_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto ta, array_input(ctx));
    ta->close();
    return {};
  }
};

result<std::shared_ptr<stack_resource>> stack_input(kernel_context& ctx) {
  RUNNEL_ASSIGN_OR_RETURN(auto* c, container(ctx));
  const tensor& h = ctx.input(0);
  if (h.type() != dtype::string || h.num_elements() != 1)
    return invalid_argument("a Stack handle must be a string scalar");
  return c->stack(*h.data<std::string>());
}

class stack_kernel : public kernel {
public:
  explicit stack_kernel(const kernel_construction& c)
      : node_(c.node.name), type_(c.attr<dtype>("elem_type")) {}
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto* c, container(ctx));
    RUNNEL_ASSIGN_OR_RETURN(int32_t max_size, scalar_index(ctx.input(0)));
    std::string handle = c->new_handle(node_);
    c->add_stack(handle, std::make_shared<stack_resource>(handle, type_, max_size));
    ctx.set_output(0, tensor::scalar<std::string>(handle));
    return {};
  }

private:
  std::string node_;
  dtype type_;
};

class push_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto s, stack_input(ctx));
    RUNNEL_RETURN_IF_ERROR(s->push(ctx.input(1)));
    ctx.set_output(0, ctx.input(1));
    return {};
  }
};

class pop_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto s, stack_input(ctx));
    RUNNEL_ASSIGN_OR_RETURN(auto t, s->pop());
    ctx.set_output(0, std::move(t));
    return {};
  }
};

class stack_close_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    RUNNEL_ASSIGN_OR_RETURN(auto s, stack_input(ctx));
    s->close();
    return {};
  }
};

} // namespace

RUNNEL_KERNEL_FAMILY(tensor_array) {
  auto cpu = device_type::cpu;
  reg.add("TensorArrayV3", cpu, {}, make_kernel<tensor_array_kernel>);
  reg.add("TensorArrayGradV3", cpu, {}, make_kernel<tensor_array_grad_kernel>);
  reg.add("TensorArrayWriteV3", cpu, {}, make_simple_kernel<write_kernel>);
  reg.add("TensorArrayReadV3", cpu, {}, make_simple_kernel<read_kernel>);
  reg.add("TensorArrayGatherV3", cpu, {}, make_kernel<gather_kernel>);
  reg.add("TensorArrayScatterV3", cpu, {}, make_simple_kernel<scatter_kernel>);
  reg.add("TensorArrayConcatV3", cpu, {}, make_kernel<concat_kernel>);
  reg.add("TensorArraySplitV3", cpu, {}, make_simple_kernel<split_kernel>);
  reg.add("TensorArraySizeV3", cpu, {}, make_simple_kernel<size_kernel>);
  reg.add("TensorArrayCloseV3", cpu, {}, make_simple_kernel<close_kernel>);
  reg.add("StackV2", cpu, {}, make_kernel<stack_kernel>);
  reg.add("StackPushV2", cpu, {}, make_simple_kernel<push_kernel>);
  reg.add("StackPopV2", cpu, {}, make_simple_kernel<pop_kernel>);
  reg.add("StackCloseV2", cpu, {}, make_simple_kernel<stack_close_kernel>);
}

} // namespace runnel
