// CUDA kernels of the array, transform and grad_support families: Const, the ops that only look
// at shapes or pass buffers along (they run their CPU kernels on the host, never touching device
// memory, so a GPU's values stay in place: TensorFlow registers them with HostMemory shape
// outputs), fills, GatherV2 (array); Squeeze (transform); BiasAddGrad and UnsortedSegmentSum
// (grad_support).
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {
namespace {

/// A CPU kernel that reads shapes and passes buffers along, run as is for a node on a GPU.
class host_side_kernel : public kernel {
public:
  explicit host_side_kernel(std::unique_ptr<kernel> inner) : inner_(std::move(inner)) {}
  status compute(kernel_context& ctx) override { return inner_->compute(ctx); }
  bool accepts_device_inputs() const override { return true; }

private:
  std::unique_ptr<kernel> inner_;
};

result<std::unique_ptr<kernel>> host_side(const kernel_construction& c) {
  RUNNEL_ASSIGN_OR_RETURN(auto* factory, builtin_kernels().find(c.node, device_type::cpu));
  kernel_construction cpu_c{c.node, c.graph, device_type::cpu, nullptr, c.resources,
                            c.output_value_needed};
  RUNNEL_ASSIGN_OR_RETURN(auto inner, (*factory)(cpu_c));
  return std::unique_ptr<kernel>(std::make_unique<host_side_kernel>(std::move(inner)));
}

result<int64_t> scalar_int(const tensor& t, const std::string& where, const char* what) {
  if (!t.host_readable() || t.num_elements() != 1 ||
      (t.type() != dtype::i32 && t.type() != dtype::i64))
    return invalid_argument(where + ": " + what + " must be one int32 or int64, got " +
                            std::string(name(t.type())) + t.shape().to_string());
  return t.type() == dtype::i32 ? int64_t(t.data<int32_t>()[0]) : t.data<int64_t>()[0];
}

} // namespace

RUNNEL_CUDA_KERNEL_FAMILY(array) {
  using inputs = cuda_kernel::inputs;
  for (auto op : {"Identity", "Reshape", "Shape"})
    t.emplace(op, [](const kernel_construction& c, cuda_device&) { return host_side(c); });
  t.emplace("Const", [](const kernel_construction& c, cuda_device& d) -> result<std::unique_ptr<kernel>> {
    if (!is_floating(c.attr<tensor>("value").type()))
      return host_side(c); // shapes, axes, indices: read on the host by the kernels that take them
    auto cached = std::make_shared<tensor>();
    return one_output(d, [value = c.attr<tensor>("value"), cached,
                          name = c.node.name](gpu_context& g, inputs, tensor* out) -> status {
      if (!cached->valid()) { // a constant goes to the device on its first step only
        RUNNEL_ASSIGN_OR_RETURN(*cached, g.to_device(value, name));
      }
      *out = *cached;
      return {};
    });
  });
  for (auto [op, value] : {std::pair{"ZerosLike", 0.0}, std::pair{"OnesLike", 1.0}})
    t.emplace(op, [value = value](const kernel_construction& c, cuda_device& d) {
      return one_output(
          d,
          [value, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
            return fill_cuda(g, in[0].type(), in[0].shape(), value, out, name);
          },
          {slot_memory::any}); // only its dtype and shape are read
    });
  t.emplace("Fill", [](const kernel_construction& c, cuda_device& d) {
    return one_output(
        d,
        [name = c.node.name](gpu_context& g, inputs in, tensor* out) -> status {
          std::string where = "node '" + name + "' (op Fill)";
          RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(in[0]));
          for (int64_t d : dims)
            if (d < 0)
              return invalid_argument(where + ": dims " + shape(dims).to_string() +
                                      " has a negative size");
          const tensor& v = in[1];
          if (v.num_elements() != 1)
            return invalid_argument(where + ": value must be a scalar, got " + v.shape().to_string());
          return fill_cuda(g, v.type(), shape(dims), element_as_double(v, 0), out, name);
        },
        {slot_memory::host, slot_memory::host});
  });
  t.emplace("GatherV2", [](const kernel_construction& c, cuda_device& d) {
    return one_output(
        d,
        [name = c.node.name](gpu_context& g, inputs in, tensor* out) -> status {
          RUNNEL_ASSIGN_OR_RETURN(int64_t axis,
                                  scalar_int(in[2], "node '" + name + "' (op GatherV2)", "axis"));
          return gather_cuda(g, in[0], in[1], axis, out, name);
        },
        {slot_memory::device, slot_memory::host, slot_memory::host});
  });
}

RUNNEL_CUDA_KERNEL_FAMILY(transform) {
  t.emplace("Squeeze", [](const kernel_construction& c, cuda_device&) { return host_side(c); });
}

RUNNEL_CUDA_KERNEL_FAMILY(grad_support) {
  using inputs = cuda_kernel::inputs;
  for (auto op : {"StopGradient", "ExpandDims", "Size", "Rank"})
    t.emplace(op, [](const kernel_construction& c, cuda_device&) { return host_side(c); });
  t.emplace("BiasAddGrad", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return bias_add_grad_cuda(g, in[0], out, name);
    });
  });
  t.emplace("UnsortedSegmentSum", [](const kernel_construction& c, cuda_device& d) {
    return one_output(
        d,
        [name = c.node.name](gpu_context& g, inputs in, tensor* out) -> status {
          RUNNEL_ASSIGN_OR_RETURN(
              int64_t n, scalar_int(in[2], "node '" + name + "' (op UnsortedSegmentSum)",
                                    "num_segments"));
          return unsorted_segment_sum_cuda(g, in[0], in[1], n, out, name);
        },
        {slot_memory::device, slot_memory::host, slot_memory::host});
  });
}

} // namespace runnel
