// Optimizer updates and sparse row operations on the GPU: the Apply* rules in place on a
// variable and its slots (the CPU kernels' arithmetic, ops/cpu/training.cpp, element for
// element), their SparseApply* forms, GatherV2, UnsortedSegmentSum and the Scatter* updates.
//
// Row operations (sparse applies, segment sums, scatters) group their rows by index on the host
// first (indices live in host memory, as TensorFlow's HostMemory int arguments): a thread per
// (distinct index, column) sums that index's rows in their original order and writes once, so
// duplicates never race and the result is deterministic. Gradient descent sums duplicates too
// (the CPU applies them one after another; the results differ by rounding only).
#include <algorithm>
#include <numeric>

#include "runnel/ops/cuda/dispatch.hpp"
#include "runnel/ops/cuda/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"

namespace runnel {
namespace {

constexpr int max_scalars = 6;

/// An update's scalars, each in device memory (read by every thread) or a value.
template <class T> struct scalar_args {
  const T* ptr[max_scalars];
  T value[max_scalars];
  __device__ T get(int i) const { return ptr[i] ? *ptr[i] : value[i]; }
};

/// One element of `r`'s update (ops/cpu/training.cpp's apply_rule), `s` the rule's scalars.
template <class T>
__device__ void apply_element(gpu_apply_rule r, bool nesterov, T& var, T* s0, T* s1, T g,
                              const scalar_args<T>& s) {
  switch (r) {
    case gpu_apply_rule::gradient_descent:
      var -= s.get(0) * g;
      break;
    case gpu_apply_rule::momentum: {
      T lr = s.get(0), mu = s.get(1);
      *s0 = *s0 * mu + g;
      var -= nesterov ? lr * g + lr * mu * *s0 : lr * *s0;
      break;
    }
    case gpu_apply_rule::adagrad:
      *s0 += g * g;
      var -= s.get(0) * g / sqrt(*s0);
      break;
    case gpu_apply_rule::rmsprop: {
      T lr = s.get(0), rho = s.get(1), mu = s.get(2), eps = s.get(3);
      *s0 = rho * *s0 + (T(1) - rho) * g * g;
      *s1 = mu * *s1 + lr * g / sqrt(*s0 + eps);
      var -= *s1;
      break;
    }
    case gpu_apply_rule::adam: {
      double b1p = double(s.get(0)), b2p = double(s.get(1));
      T lr = s.get(2), b1 = s.get(3), b2 = s.get(4), eps = s.get(5);
      T lr_t = T(double(lr) * sqrt(1 - b2p) / (1 - b1p));
      *s0 += (g - *s0) * (T(1) - b1);
      *s1 += (g * g - *s1) * (T(1) - b2);
      T step = nesterov ? *s0 * b1 + (T(1) - b1) * g : *s0;
      var -= lr_t * step / (sqrt(*s1) + eps);
      break;
    }
  }
}

// ---- kernels ----

template <class T>
__global__ void apply_kernel(gpu_apply_rule r, bool nesterov, T* var, T* s0, T* s1, const T* grad,
                             int64_t n, scalar_args<T> s) {
  T unused = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(blockDim.x) * gridDim.x)
    apply_element(r, nesterov, var[i], s0 ? s0 + i : &unused, s1 ? s1 + i : &unused, grad[i], s);
}

constexpr int max_multi = 16;

/// Up to max_multi variables of one multi-tensor update: pointers and element counts.
template <class T> struct multi_args {
  T* var[max_multi];
  T* s0[max_multi];
  T* s1[max_multi];
  const T* grad[max_multi];
  int64_t n[max_multi];
  int count;
};

/// Every thread strides over each variable in turn: one launch for all of them.
template <class T>
__global__ void multi_apply_kernel(gpu_apply_rule r, bool nesterov, multi_args<T> a,
                                   scalar_args<T> s) {
  T unused = 0;
  int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x,
          stride = int64_t(blockDim.x) * gridDim.x;
  for (int t = 0; t < a.count; ++t) {
    T *var = a.var[t], *s0 = a.s0[t], *s1 = a.s1[t];
    const T* grad = a.grad[t];
    for (int64_t i = first; i < a.n[t]; i += stride)
      apply_element(r, nesterov, var[i], s0 ? s0 + i : &unused, s1 ? s1 + i : &unused, grad[i], s);
  }
}

/// The rows of a row plan: `unique[r]` is the r-th distinct index, its source rows are
/// order[starts[r]] .. order[starts[r + 1] - 1] (original order).
struct row_plan_view {
  const int64_t* unique;
  const int64_t* starts;
  const int64_t* order;
  int64_t rows; ///< distinct indices
};

template <class T>
__global__ void sparse_apply_kernel(gpu_apply_rule r, bool nesterov, T* var, T* s0, T* s1,
                                    const T* grad, row_plan_view p, int64_t row, scalar_args<T> s) {
  T unused = 0;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.rows * row;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t rr = e / row, j = e % row;
    T g = 0;
    for (int64_t k = p.starts[rr]; k < p.starts[rr + 1]; ++k)
      g += grad[p.order[k] * row + j];
    int64_t at = p.unique[rr] * row + j;
    apply_element(r, nesterov, var[at], s0 ? s0 + at : &unused, s1 ? s1 + at : &unused, g, s);
  }
}

enum class row_write { set_sum, add, sub, set_last };

/// out[unique[r]] (op)= the rows of `src` grouped under it: their sum, or the last one.
template <class T>
__global__ void row_write_kernel(T* out, const T* src, row_plan_view p, int64_t row, row_write w) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < p.rows * row;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t r = e / row, j = e % row;
    T* dst = out + p.unique[r] * row + j;
    if (w == row_write::set_last) {
      *dst = src[p.order[p.starts[r + 1] - 1] * row + j];
      continue;
    }
    compute_t<T> acc = 0;
    for (int64_t k = p.starts[r]; k < p.starts[r + 1]; ++k)
      acc += to_compute(src[p.order[k] * row + j]);
    if (w == row_write::add)
      acc = to_compute(*dst) + acc;
    else if (w == row_write::sub)
      acc = to_compute(*dst) - acc;
    *dst = from_compute<T>(acc);
  }
}

/// out[o, i, :] = params[o, idx[i], :] over bytes: elements of `es` bytes moved as units.
template <class U>
__global__ void gather_kernel(const U* params, const int64_t* idx, U* out, int64_t outer,
                              int64_t k, int64_t limit, int64_t inner) {
  int64_t total = outer * k * inner;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t j = e % inner, i = (e / inner) % k, o = e / (inner * k);
    out[e] = params[(o * limit + idx[i]) * inner + j];
  }
}

int blocks_for(int64_t n) {
  return int(std::min<int64_t>((n + 255) / 256, 65535 * 4));
}

// ---- host side ----

std::string where_of(const std::string& node, const char* op) {
  return "node '" + node + "' (op " + op + ")";
}

status on_device(const tensor& t, const std::string& where, const char* what) {
  if (t.memory() != memory_space::device)
    return invalid_argument(where + ": " + what + " is in " + t.memory_name() +
                            ", not GPU memory");
  return {};
}

/// A row plan of `idx` on the device (one buffer: unique, starts, order), or an error naming
/// the first index out of [0, limit) (negative indices are dropped with `drop_negative`).
struct row_plan {
  tensor buffer; // int64 [unique | starts | order]
  row_plan_view view{};
};

result<row_plan> plan_rows(gpu_context& gpu, const std::vector<int64_t>& idx, int64_t limit,
                           bool drop_negative, const std::string& what, const std::string& where,
                           const std::string& node) {
  std::vector<int64_t> order;
  order.reserve(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 && drop_negative)
      continue;
    if (idx[i] < 0 || idx[i] >= limit)
      return invalid_argument(where + ": " + what + "[" + std::to_string(i) + "] = " +
                              std::to_string(idx[i]) + " is not in [0, " + std::to_string(limit) +
                              ")");
    order.push_back(int64_t(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return idx[size_t(a)] < idx[size_t(b)]; });
  std::vector<int64_t> unique, starts;
  for (size_t k = 0; k < order.size(); ++k)
    if (k == 0 || idx[size_t(order[k])] != idx[size_t(order[k - 1])]) {
      unique.push_back(idx[size_t(order[k])]);
      starts.push_back(int64_t(k));
    }
  starts.push_back(int64_t(order.size()));
  std::vector<int64_t> all = unique;
  all.insert(all.end(), starts.begin(), starts.end());
  all.insert(all.end(), order.begin(), order.end());
  row_plan p;
  RUNNEL_ASSIGN_OR_RETURN(p.buffer, gpu.to_device(tensor::vector<int64_t>(all), node));
  const int64_t* base = p.buffer.data<int64_t>();
  p.view = {base, base + unique.size(), base + unique.size() + starts.size(), int64_t(unique.size())};
  return p;
}

result<std::vector<int64_t>> host_indices(const tensor& t, const std::string& where, const char* what) {
  if (!t.host_readable())
    return invalid_argument(where + ": " + what + " must be in host memory, got " + t.memory_name());
  if (t.type() != dtype::i32 && t.type() != dtype::i64)
    return invalid_argument(where + ": " + what + " must be int32 or int64, got " +
                            std::string(name(t.type())));
  std::vector<int64_t> v(size_t(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.type() == dtype::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
  return v;
}

template <class T>
result<scalar_args<T>> scalars_of(std::span<const tensor> scalars, const std::string& where) {
  if (scalars.size() > size_t(max_scalars))
    return internal_error(where + ": too many scalars");
  scalar_args<T> s{};
  for (size_t i = 0; i < scalars.size(); ++i) {
    const tensor& t = scalars[i];
    if (t.num_elements() != 1)
      return invalid_argument(where + ": scalar input " + std::to_string(i) + " has shape " +
                              t.shape().to_string());
    if (t.type() != dtype_of<T>)
      return invalid_argument(where + ": scalar input " + std::to_string(i) + " is " +
                              std::string(name(t.type())) + ", the variable " +
                              std::string(name(dtype_of<T>)));
    if (t.memory() == memory_space::device)
      s.ptr[i] = t.data<T>();
    else
      s.value[i] = t.data<T>()[0];
  }
  return s;
}

status check_slots(const tensor& var, std::span<const tensor> slots, const std::string& where) {
  if (slots.size() > 2)
    return internal_error(where + ": at most two slots");
  for (auto& s : slots)
    if (!(s.shape() == var.shape()) || s.type() != var.type() ||
        s.memory() != memory_space::device)
      return invalid_argument(where + ": a slot of shape " + s.shape().to_string() + " (" +
                              s.memory_name() + ") does not match the variable's " +
                              var.shape().to_string());
  return {};
}

} // namespace

status apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov, const tensor& var,
                  std::span<const tensor> slots, std::span<const tensor> scalars,
                  const tensor& grad, const std::string& node, const char* op) {
  std::string where = where_of(node, op);
  RUNNEL_RETURN_IF_ERROR(on_device(var, where, "the variable"));
  RUNNEL_RETURN_IF_ERROR(on_device(grad, where, "the gradient"));
  RUNNEL_RETURN_IF_ERROR(check_slots(var, slots, where));
  if (!(grad.shape() == var.shape()) || grad.type() != var.type())
    return invalid_argument(where + ": the gradient " + std::string(name(grad.type())) +
                            grad.shape().to_string() + " does not match the variable " +
                            std::string(name(var.type())) + var.shape().to_string());
  int64_t n = var.num_elements();
  auto go = [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(auto s, scalars_of<T>(scalars, where));
    if (n == 0)
      return status{};
    apply_kernel<T><<<blocks_for(n), 256, 0, gpu.compute()>>>(
        rule, nesterov, var.data<T>(), slots.size() > 0 ? slots[0].data<T>() : nullptr,
        slots.size() > 1 ? slots[1].data<T>() : nullptr, grad.data<T>(), n, s);
    return cuda_status(cudaGetLastError(), where);
  };
  if (var.type() == dtype::f32)
    return go.template operator()<float>();
  if (var.type() == dtype::f64)
    return go.template operator()<double>();
  return unimplemented(where + ": no GPU kernel for " + std::string(name(var.type())));
}

status multi_apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov,
                        std::span<const tensor> vars, std::span<const std::vector<tensor>> slots,
                        std::span<const tensor> scalars, std::span<const tensor> grads,
                        const std::string& node, const char* op) {
  std::string where = where_of(node, op);
  if (vars.empty() || slots.size() != vars.size() || grads.size() != vars.size())
    return internal_error(where + ": one gradient and slot list per variable expected");
  for (size_t k = 0; k < vars.size(); ++k) {
    const tensor &var = vars[k], &grad = grads[k];
    RUNNEL_RETURN_IF_ERROR(on_device(var, where, "a variable"));
    RUNNEL_RETURN_IF_ERROR(on_device(grad, where, "a gradient"));
    RUNNEL_RETURN_IF_ERROR(check_slots(var, slots[k], where));
    if (!(grad.shape() == var.shape()) || grad.type() != vars[0].type() ||
        var.type() != vars[0].type())
      return invalid_argument(where + ": gradient " + std::to_string(k) + " " +
                              std::string(name(grad.type())) + grad.shape().to_string() +
                              " does not match its variable " + std::string(name(var.type())) +
                              var.shape().to_string() + " (all " +
                              std::string(name(vars[0].type())) + ")");
  }
  auto go = [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(auto s, scalars_of<T>(scalars, where));
    for (size_t from = 0; from < vars.size(); from += max_multi) {
      multi_args<T> a{};
      int64_t largest = 0;
      for (size_t k = from; k < vars.size() && a.count < max_multi; ++k, ++a.count) {
        a.var[a.count] = vars[k].data<T>();
        a.s0[a.count] = slots[k].size() > 0 ? slots[k][0].data<T>() : nullptr;
        a.s1[a.count] = slots[k].size() > 1 ? slots[k][1].data<T>() : nullptr;
        a.grad[a.count] = grads[k].data<T>();
        a.n[a.count] = vars[k].num_elements();
        largest = std::max(largest, a.n[a.count]);
      }
      if (largest == 0)
        continue;
      multi_apply_kernel<T><<<blocks_for(largest), 256, 0, gpu.compute()>>>(rule, nesterov, a, s);
      RUNNEL_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), where));
    }
    return status{};
  };
  if (vars[0].type() == dtype::f32)
    return go.template operator()<float>();
  if (vars[0].type() == dtype::f64)
    return go.template operator()<double>();
  return unimplemented(where + ": no GPU kernel for " + std::string(name(vars[0].type())));
}

status sparse_apply_cuda(gpu_context& gpu, gpu_apply_rule rule, bool nesterov, const tensor& var,
                         std::span<const tensor> slots, std::span<const tensor> scalars,
                         const tensor& grad, const tensor& indices, const std::string& node,
                         const char* op) {
  std::string where = where_of(node, op);
  RUNNEL_RETURN_IF_ERROR(on_device(var, where, "the variable"));
  RUNNEL_RETURN_IF_ERROR(on_device(grad, where, "the gradient"));
  RUNNEL_RETURN_IF_ERROR(check_slots(var, slots, where));
  RUNNEL_ASSIGN_OR_RETURN(auto idx, host_indices(indices, where, "indices"));
  bool fits = var.rank() >= 1 && grad.rank() == var.rank() && indices.rank() == 1 &&
              grad.dim(0) == int64_t(idx.size()) && grad.type() == var.type();
  for (int d = 1; fits && d < var.rank(); ++d)
    fits = var.dim(d) == grad.dim(d);
  if (!fits)
    return invalid_argument(where + ": the gradient rows " + std::string(name(grad.type())) +
                            grad.shape().to_string() + " for indices " +
                            indices.shape().to_string() + " do not fit the variable " +
                            std::string(name(var.type())) + var.shape().to_string());
  int64_t row = var.dim(0) == 0 ? 0 : var.num_elements() / var.dim(0);
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_rows(gpu, idx, var.dim(0), false, "indices", where, node));
  auto go = [&]<class T>() -> status {
    RUNNEL_ASSIGN_OR_RETURN(auto s, scalars_of<T>(scalars, where));
    if (plan.view.rows * row == 0)
      return status{};
    sparse_apply_kernel<T><<<blocks_for(plan.view.rows * row), 256, 0, gpu.compute()>>>(
        rule, nesterov, var.data<T>(), slots.size() > 0 ? slots[0].data<T>() : nullptr,
        slots.size() > 1 ? slots[1].data<T>() : nullptr, grad.data<T>(), plan.view, row, s);
    return cuda_status(cudaGetLastError(), where);
  };
  if (var.type() == dtype::f32)
    return go.template operator()<float>();
  if (var.type() == dtype::f64)
    return go.template operator()<double>();
  return unimplemented(where + ": no GPU kernel for " + std::string(name(var.type())));
}

status gather_cuda(gpu_context& gpu, const tensor& params, const tensor& indices, int64_t axis,
                   tensor* out, const std::string& node) {
  std::string where = where_of(node, "GatherV2");
  RUNNEL_RETURN_IF_ERROR(on_device(params, where, "params"));
  if (params.rank() < 1)
    return invalid_argument(where + ": params must have rank at least 1");
  if (axis < 0)
    axis += params.rank();
  if (axis < 0 || axis >= params.rank())
    return invalid_argument(where + ": axis is out of range for params " + params.shape().to_string());
  RUNNEL_ASSIGN_OR_RETURN(auto idx, host_indices(indices, where, "indices"));
  int64_t limit = params.dim(int(axis));
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] < 0 || idx[i] >= limit)
      return invalid_argument(where + ": indices[" + std::to_string(i) + "] = " +
                              std::to_string(idx[i]) + " is not in [0, " + std::to_string(limit) + ")");
  std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + axis);
  dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
  dims.insert(dims.end(), params.shape().dims().begin() + axis + 1, params.shape().dims().end());
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(params.type(), shape(dims), node));
  int64_t outer = 1, inner = 1, k = int64_t(idx.size());
  for (int d = 0; d < axis; ++d)
    outer *= params.dim(d);
  for (int d = int(axis) + 1; d < params.rank(); ++d)
    inner *= params.dim(d);
  if (out->num_elements() == 0)
    return {};
  RUNNEL_ASSIGN_OR_RETURN(tensor dev_idx, gpu.to_device(tensor::vector<int64_t>(idx), node));
  auto go = [&]<class U>() {
    gather_kernel<U><<<blocks_for(outer * k * inner), 256, 0, gpu.compute()>>>(
        static_cast<const U*>(params.raw_data()), dev_idx.data<int64_t>(),
        static_cast<U*>(out->raw_data()), outer, k, limit, inner);
    return cuda_status(cudaGetLastError(), where);
  };
  switch (size_of(params.type())) { // gathers move elements: only their size matters
    case 1:
      return go.template operator()<uint8_t>();
    case 2:
      return go.template operator()<uint16_t>();
    case 4:
      return go.template operator()<uint32_t>();
    case 8:
      return go.template operator()<uint64_t>();
    default:
      return unimplemented(where + ": no GPU kernel for " + std::string(name(params.type())));
  }
}

status unsorted_segment_sum_cuda(gpu_context& gpu, const tensor& data, const tensor& segment_ids,
                                 int64_t num_segments, tensor* out, const std::string& node) {
  std::string where = where_of(node, "UnsortedSegmentSum");
  RUNNEL_RETURN_IF_ERROR(on_device(data, where, "data"));
  RUNNEL_ASSIGN_OR_RETURN(auto ids, host_indices(segment_ids, where, "segment_ids"));
  for (int d = 0; d < segment_ids.rank(); ++d)
    if (d >= data.rank() || segment_ids.dim(d) != data.dim(d))
      return invalid_argument(where + ": segment_ids of shape " + segment_ids.shape().to_string() +
                              " must be a prefix of data's shape " + data.shape().to_string());
  if (num_segments < 0)
    return invalid_argument(where + ": num_segments is negative");
  std::vector<int64_t> dims{num_segments};
  for (int d = segment_ids.rank(); d < data.rank(); ++d)
    dims.push_back(data.dim(d));
  RUNNEL_ASSIGN_OR_RETURN(*out, gpu.allocate(data.type(), shape(dims), node));
  int64_t row = num_segments ? out->num_elements() / num_segments : 0;
  RUNNEL_RETURN_IF_ERROR(
      cuda_status(cudaMemsetAsync(out->raw_data(), 0, out->bytes(), gpu.compute()), where));
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_rows(gpu, ids, num_segments, true, "segment_ids", where, node));
  if (plan.view.rows * row == 0)
    return {};
  return dispatch_gpu_number(data.type(), where, [&]<class T>() {
    row_write_kernel<T><<<blocks_for(plan.view.rows * row), 256, 0, gpu.compute()>>>(
        out->data<T>(), data.data<T>(), plan.view, row, row_write::set_sum);
    return cuda_status(cudaGetLastError(), where);
  });
}

status scatter_cuda(gpu_context& gpu, gpu_scatter kind, const tensor& var, const tensor& indices,
                    const tensor& updates, const std::string& node, const char* op) {
  std::string where = where_of(node, op);
  RUNNEL_RETURN_IF_ERROR(on_device(var, where, "the variable"));
  RUNNEL_RETURN_IF_ERROR(on_device(updates, where, "updates"));
  RUNNEL_ASSIGN_OR_RETURN(auto idx, host_indices(indices, where, "indices"));
  int64_t rows = var.rank() >= 1 ? var.dim(0) : 0;
  int64_t row = rows == 0 ? 0 : var.num_elements() / rows;
  if (var.rank() < 1 || updates.type() != var.type() ||
      updates.num_elements() != int64_t(idx.size()) * row)
    return invalid_argument(where + ": updates " + std::string(name(updates.type())) +
                            updates.shape().to_string() + " for " + std::to_string(idx.size()) +
                            " indices do not fit the variable " + std::string(name(var.type())) +
                            var.shape().to_string());
  RUNNEL_ASSIGN_OR_RETURN(auto plan, plan_rows(gpu, idx, rows, false, "indices", where, node));
  if (plan.view.rows * row == 0)
    return {};
  row_write w = kind == gpu_scatter::add   ? row_write::add
                : kind == gpu_scatter::sub ? row_write::sub
                                           : row_write::set_last;
  return dispatch_gpu_number(var.type(), where, [&]<class T>() {
    row_write_kernel<T><<<blocks_for(plan.view.rows * row), 256, 0, gpu.compute()>>>(
        var.data<T>(), updates.data<T>(), plan.view, row, w);
    return cuda_status(cudaGetLastError(), where);
  });
}

} // namespace runnel
