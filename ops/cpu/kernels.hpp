#pragma once
// Helpers the CPU kernel files share (each file registers its family with RUNNEL_KERNEL_FAMILY).
#include <cmath>
#include <random>
#include <type_traits>

#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/kernel/kernel.hpp"

namespace runnel {

/// Whether _FusedElementwise (ops/cpu/fused_elementwise.cpp) runs `op`.
bool fused_elementwise_runs(const std::string& op);
/// Every op _FusedElementwise runs (the coverage test checks each is a defined op).
std::vector<std::string> fused_elementwise_ops();
/// Finishes an asynchronous kernel that waited for `out` (a dequeue, a take): when its step was
/// aborted meanwhile, `give_back` returns `out` to where it came from (nothing is lost) and the
/// kernel ends with `cancelled`; otherwise `out` becomes its outputs.
inline void finish_wait(kernel_context& ctx, status st, std::vector<tensor> out,
                        const std::function<void(std::vector<tensor>)>& give_back,
                        const std::function<void(status)>& done) {
  if (st.ok() && ctx.step_aborted()) {
    give_back(std::move(out));
    return done(cancelled("the step was aborted"));
  }
  if (st.ok())
    for (size_t i = 0; i < out.size(); ++i)
      ctx.set_output(int(i), std::move(out[i]));
  done(std::move(st));
}
/// The runtime name of a resource node: its shared_name, or its node name.
std::string resource_name(const node& n);
/// The queue a queue node (FIFOQueueV2, ...) stands for, created on first use.
result<std::shared_ptr<queue_resource>> queue_of_node(const kernel_construction& c, const node& q);
/// The queue behind input `i` of the node being built; an error naming the producer otherwise.
result<std::shared_ptr<queue_resource>> input_queue(const kernel_construction& c, size_t i = 0);

/// `t` (float16 or bfloat16) as a float32 tensor of the same shape.
tensor widen_to_f32(const tensor& t, cpu_device* cpu);
/// `t` (float32) rounded to nearest even into `to` (float16 or bfloat16).
tensor narrow_from_f32(const tensor& t, dtype to, cpu_device* cpu);

/// Passes its input on unchanged, sharing the buffer (Identity, and Enter, Exit, NextIteration
/// and LoopCond on live values).
class identity_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override;
  bool reentrant() const override { return true; }
};

/// Elements below which an element-wise loop stays on one thread.
inline constexpr int64_t elementwise_grain = int64_t(1) << 15;

/// The arithmetic types the numeric kernels are compiled for (anything else runs as float:
/// register such kernels for explicit dtypes, so 16-bit floats reach their widened forms).
template <class F> decltype(auto) dispatch_number(dtype t, F&& f) {
  switch (t) {
    case dtype::f64:
      return f.template operator()<double>();
    case dtype::i32:
      return f.template operator()<int32_t>();
    case dtype::i64:
      return f.template operator()<int64_t>();
    default:
      return f.template operator()<float>();
  }
}

/// Asks the cache for the `bytes` at `p` ahead of use: rows read or written at random (gathers
/// and scatters of a large table) otherwise wait on memory one at a time.
inline void prefetch_bytes(const void* p, size_t bytes, bool for_write = false) {
  auto* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) {
    if (for_write)
      __builtin_prefetch(c + off, 1);
    else
      __builtin_prefetch(c + off, 0);
  }
}
/// How many rows ahead a row-at-a-time loop prefetches.
inline constexpr int64_t prefetch_rows = 8;

/// The elements of an int32 or int64 tensor of any shape, as int64.
std::vector<int64_t> flatten_indices(const tensor& t);
/// Seeds a random kernel's engine from its `seed` and `seed2` attributes as TensorFlow does:
/// both zero draws a fresh seed; otherwise the sequence is the same for the same seeds.
void seed_engine(std::mt19937_64& engine, const kernel_construction& c);

/// invalid_argument naming the first index outside [0, rows) and the variable, if any
/// (Scatter* and SparseApply*).
status check_rows(const std::vector<int64_t>& idx, int64_t rows, const std::string& var_name);

/// Copies `n` elements of type `t` (strings by value, the rest by memcpy).
void copy_elements(dtype t, const void* src, void* dst, int64_t n);

/// Reads an axis argument (a scalar int tensor) and normalises it against `rank`.
result<int64_t> read_axis(const tensor& t, int rank, const char* what);

} // namespace runnel
