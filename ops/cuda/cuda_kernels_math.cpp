// CUDA kernels of the math family (element-wise ops, Cast, AddN, Select, reductions, MatMul) and
// of the random family (RandomUniform).
#include <atomic>
#include <memory>
#include <random>

#include "runnel/ops/cuda/cuda_kernel.hpp"
#include "runnel/ops/cuda/kernels.hpp"

namespace runnel {

RUNNEL_CUDA_KERNEL_FAMILY(math) {
  using inputs = cuda_kernel::inputs;
  for (auto& b : binary_ops) // the rows of ops/core/binary_ops.hpp with CUDA kernels
    if (b.devices != binary_devices::cpu)
      t.emplace(b.name, [kind = b.op](const kernel_construction& c, cuda_device& d) {
        return one_output(d, [kind, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
          return binary_cuda(g, kind, in[0], in[1], out, name);
        });
      });
  for (auto& u : unary_ops) // every row of ops/core/unary_ops.hpp
    t.emplace(u.name, [kind = u.op](const kernel_construction& c, cuda_device& d) {
      return one_output(d, [kind, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
        return unary_cuda(g, kind, in[0], out, name);
      });
    });
  t.emplace("_UnaryGrad", [](const kernel_construction& c, cuda_device& d) {
    auto* row = find_unary_op(c.attr<std::string>("op"));
    if (!row || !row->has_grad)
      return result<std::unique_ptr<kernel>>(invalid_argument(
          "node '" + c.node.name + "': _UnaryGrad of '" + c.attr<std::string>("op") +
          "', which has no gradient functor (ops/core/unary_ops.hpp)"));
    return one_output(d,
                      [op = row->op, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
                        return unary_grad_cuda(g, op, in[0], in[1], in[2], out, name);
                      });
  });
  static const std::vector<std::pair<const char*, gpu_reduce>> reductions{
      {"Sum", gpu_reduce::sum},
      {"Mean", gpu_reduce::mean},
      {"Max", gpu_reduce::max},
      {"Min", gpu_reduce::min}};
  for (auto& [op, kind] : reductions)
    t.emplace(op, [kind = kind](const kernel_construction& c, cuda_device& d) {
      return one_output(d,
                        [kind, keep = c.attr<bool>("keep_dims"),
                         name = c.node.name](gpu_context& g, inputs in, tensor* out) {
                          return reduce_cuda(g, kind, in[0], in[1], keep, out, name);
                        },
                        {slot_memory::device, slot_memory::host}); // the axes are read on the host
    });
  t.emplace("Cast", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [to = c.attr<dtype>("DstT"), name = c.node.name](gpu_context& g, inputs in,
                                                                          tensor* out) {
      return cast_cuda(g, in[0], to, out, name);
    });
  });
  t.emplace("AddN", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return add_n_cuda(g, in, out, name);
    });
  });
  t.emplace("Select", [](const kernel_construction& c, cuda_device& d) {
    return one_output(d, [name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return select_cuda(g, in[0], in[1], in[2], out, name);
    });
  });
  t.emplace("MatMul", [](const kernel_construction& c, cuda_device& d) {
    gpu_matmul_options o{.transpose_a = c.attr<bool>("transpose_a"),
                         .transpose_b = c.attr<bool>("transpose_b")};
    return one_output(d, [o, name = c.node.name](gpu_context& g, inputs in, tensor* out) {
      return matmul_cuda(g, in[0], in[1], o, out, name);
    });
  });
}

RUNNEL_CUDA_KERNEL_FAMILY(random) {
  using inputs = cuda_kernel::inputs;
  t.emplace("RandomUniform", [](const kernel_construction& c, cuda_device& d) {
    // Seeds as on the CPU: both zero draws a fresh sequence; else the same one every time.
    auto seed = uint64_t(c.attr<int64_t>("seed")), seed2 = uint64_t(c.attr<int64_t>("seed2"));
    uint64_t key = seed * 0x9E3779B97F4A7C15ull ^ (seed2 + 0xD1B54A32D192ED03ull);
    if (seed == 0 && seed2 == 0) {
      std::random_device rd;
      key = (uint64_t(rd()) << 32) | rd();
    }
    auto runs = std::make_shared<std::atomic<uint64_t>>(0);
    return one_output(
        d,
        [type = c.attr<dtype>("dtype"), key, runs, name = c.node.name](gpu_context& g, inputs in,
                                                                       tensor* out) -> status {
          RUNNEL_ASSIGN_OR_RETURN(auto dims, to_int64_vector(in[0]));
          for (int64_t v : dims)
            if (v < 0)
              return invalid_argument("node '" + name + "' (op RandomUniform): shape " +
                                      shape(dims).to_string() + " has a negative size");
          return random_uniform_cuda(g, type, shape(dims), key, runs->fetch_add(1), out, name);
        },
        {slot_memory::host}); // the shape is read on the host
  });
}

} // namespace runnel
