#pragma once
// The runtime's CUDA kernels (private to ops/cuda). A node's kernel enqueues its work on the
// GPU's compute stream and completes at once when the runtime has one GPU (the stream orders
// what follows), else when the stream gets past it (an event the accelerator's poller
// watches); either way the node's actor never blocks (cuda_device::finish).
//
// Every op with a CUDA kernel has one factory in one table, by op name (cuda_kernels(), filled
// by the RUNNEL_CUDA_KERNEL_FAMILY functions of cuda_kernels_*.cpp). ops/gpu/gpu_kernels.cpp lists
// the same ops with their dtypes for placement (the simulated GPU needs that list without CUDA);
// the [gpu_host] test "the CUDA kernel table and the GPU op list name the same ops" keeps the
// two in step.
//
//   t.emplace("Relu", [](const kernel_construction& c, cuda_device& d) {
//     return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
//       return unary_cuda(g, unary_op::Relu, in[0], out, name);
//     });
//   });
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/cuda/gpu_context.hpp"
#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {

/// What CUDA kernels need of their GPU.
class cuda_device {
public:
  virtual ~cuda_device() = default;
  virtual gpu_context& context() = 0;
  /// Completes a node whose work is enqueued on the compute stream, `staged` being what it read.
  /// Stream-ordered (a runtime's only GPU): at once, as TensorFlow's GPU kernels do; what runs
  /// after it on this GPU is ordered by the stream, and copies off the GPU wait for the stream.
  /// Otherwise (several GPUs: a consumer on another GPU's stream must not read it early, or
  /// RUNNEL_GPU_SYNC_EACH_OP=1 to find a failing kernel): once the stream has run it.
  virtual void finish(std::shared_ptr<std::vector<tensor>> staged,
                      std::function<void(status)> done) = 0;
};

/// Where a kernel reads an input: in this GPU's memory (the default), on the host (shapes, axes,
/// indices: TensorFlow's HostMemory arguments), or wherever it is (kernels that only look at
/// shapes, or decide themselves).
enum class slot_memory : uint8_t { device, host, any };

/// Brings a node's inputs where its kernel reads them: for device slots, tensors of this GPU as
/// they are, host tensors copied to the device (asynchronously, ordered before the compute
/// work), another GPU's tensors copied over directly; for host slots, host tensors as they are
/// and device tensors read back (small). Slots past `slots`' end are device slots.
status stage_inputs(gpu_context& gpu, std::span<const tensor> inputs,
                    const std::vector<slot_memory>& slots, std::vector<tensor>& staged);

/// A node's CUDA kernel: stages the inputs, runs `launch` (which enqueues the work and sets the
/// outputs, allocated in device memory), and completes once the compute stream has run it.
class cuda_kernel : public kernel {
public:
  using inputs = std::span<const tensor>;
  using launch_fn = std::function<status(gpu_context&, inputs, kernel_context& ctx)>;
  cuda_kernel(cuda_device& gpu, launch_fn launch, std::vector<slot_memory> slots = {})
      : gpu_(gpu), launch_(std::move(launch)), slots_(std::move(slots)) {}
  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("GPU kernels are asynchronous"); }
  void compute_async(kernel_context& ctx, std::function<void(status)> done) override;

private:
  cuda_device& gpu_;
  launch_fn launch_;
  std::vector<slot_memory> slots_;
};

using cuda_factory =
    std::function<result<std::unique_ptr<kernel>>(const kernel_construction&, cuda_device&)>;
using cuda_kernel_table = std::unordered_map<std::string, cuda_factory>;

/// Every op's CUDA kernel factory.
const cuda_kernel_table& cuda_kernels();

/// Starts the function that adds a family's CUDA kernels to the table, in a cuda_kernels_*.cpp:
///
///   RUNNEL_CUDA_KERNEL_FAMILY(linalg) { t.emplace("MatrixInverse", ...); }
///
/// The build lists every such line (cmake/ops_families.cmake) and cuda_kernels() calls them all;
/// the family is the one that defines the ops (ops/defs/F_ops.cpp), as for CPU kernels
/// (RUNNEL_KERNEL_FAMILY), and a family written in several functions names each part:
/// RUNNEL_CUDA_KERNEL_FAMILY_PART(family, part).
#define RUNNEL_CUDA_KERNEL_FAMILY(family)                                                          \
  void add_##family##_cuda_kernels(::runnel::cuda_kernel_table& t);                                \
  void add_##family##_cuda_kernels(::runnel::cuda_kernel_table& t)
#define RUNNEL_CUDA_KERNEL_FAMILY_PART(family, part) RUNNEL_CUDA_KERNEL_FAMILY(family##_##part)

/// A kernel with one output, which `f(gpu, inputs, &out)` allocates and enqueues.
template <class F>
result<std::unique_ptr<kernel>> one_output(cuda_device& d, F f, std::vector<slot_memory> slots = {}) {
  return std::unique_ptr<kernel>(std::make_unique<cuda_kernel>(
      d,
      [f = std::move(f)](gpu_context& g, cuda_kernel::inputs in, kernel_context& ctx) -> status {
        tensor out;
        RUNNEL_RETURN_IF_ERROR(f(g, in, &out));
        ctx.set_output(0, std::move(out));
        return {};
      },
      std::move(slots)));
}

/// `c`'s conv/pool attributes: strides[1], strides[2] of an NHWC op, and its padding.
struct window_attrs {
  int64_t window_h = 1, window_w = 1, stride_h = 1, stride_w = 1;
  std::string padding;
};
result<window_attrs> read_window_attrs(const kernel_construction& c, bool has_ksize);

} // namespace runnel
