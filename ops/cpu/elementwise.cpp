// Binary element-wise kernels with NumPy broadcasting, one per row of ops/core/binary_ops.hpp
// (arithmetic, comparisons, logic, the activations' gradients), LogicalNot and Select (unary
// math, Cast, AddN and fills: unary.cpp).
#include <algorithm>
#include <array>

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/eigen_access.hpp"
#include "runnel/ops/cpu/kernels.hpp"

namespace runnel {
namespace {

// Broadcasting plan: the output shape and, per output dimension, each input's stride (0 where
// the input is broadcast). Adjacent dimensions that broadcast the same way are merged, so most
// real cases become one or two loops. Fixed-size arrays keep the hot path free of allocation.
constexpr int max_broadcast_rank = 8;

struct broadcast_plan {
  int rank = 0;
  std::array<int64_t, max_broadcast_rank> dims{}, stride_a{}, stride_b{};
  int64_t count = 1;
};

result<broadcast_plan> plan_broadcast(const shape& a, const shape& b, const shape& out) {
  int r = out.rank();
  broadcast_plan p;
  p.count = out.num_elements();
  if (a == b || b.rank() == 0 || a.rank() == 0) { // the common cases: one flat loop
    p.rank = 1;
    p.dims[0] = std::max<int64_t>(p.count, 1);
    p.stride_a[0] = a.num_elements() == 1 && p.count != 1 ? 0 : 1;
    p.stride_b[0] = b.num_elements() == 1 && p.count != 1 ? 0 : 1;
    return p;
  }
  if (r > max_broadcast_rank)
    return unimplemented("broadcasting supports ranks up to " + std::to_string(max_broadcast_rank) +
                         ", got " + out.to_string());
  std::array<int64_t, max_broadcast_rank> sa{}, sb{};
  broadcast_strides(a, out, sa.data());
  broadcast_strides(b, out, sb.data());
  // Merge a dimension into the run inside it when both inputs step through them contiguously
  // (or both broadcast), working outwards from the innermost dimension. Runs are built
  // innermost-first into the back of the arrays, then moved to the front.
  int k = max_broadcast_rank; // runs occupy [k, max)
  for (int d = r - 1; d >= 0; --d) {
    int64_t n = out[d];
    if (n == 1)
      continue;
    if (k < max_broadcast_rank) {
      size_t i = size_t(k);
      bool a_merge =
          (sa[size_t(d)] == 0 && p.stride_a[i] == 0) ||
          (sa[size_t(d)] != 0 && p.stride_a[i] != 0 && sa[size_t(d)] == p.stride_a[i] * p.dims[i]);
      bool b_merge =
          (sb[size_t(d)] == 0 && p.stride_b[i] == 0) ||
          (sb[size_t(d)] != 0 && p.stride_b[i] != 0 && sb[size_t(d)] == p.stride_b[i] * p.dims[i]);
      if (a_merge && b_merge) {
        p.dims[i] *= n;
        continue;
      }
    }
    --k;
    p.dims[size_t(k)] = n;
    p.stride_a[size_t(k)] = sa[size_t(d)];
    p.stride_b[size_t(k)] = sb[size_t(d)];
  }
  p.rank = max_broadcast_rank - k;
  for (int i = 0; i < p.rank; ++i) {
    p.dims[size_t(i)] = p.dims[size_t(k + i)];
    p.stride_a[size_t(i)] = p.stride_a[size_t(k + i)];
    p.stride_b[size_t(i)] = p.stride_b[size_t(k + i)];
  }
  if (p.rank == 0) {
    p.rank = 1;
    p.dims[0] = 1;
    p.stride_a[0] = 0;
    p.stride_b[0] = 0;
  }
  return p;
}

// Runs out[i] = f(a[ia], b[ib]) over the plan; rows of the innermost dimension are the unit of
// parallel work.
template <class In, class Out, class F>
void run_broadcast(cpu_device& cpu, const broadcast_plan& p, const In* a, const In* b, Out* out,
                   F f) {
  if (p.count == 0)
    return;
  int r = p.rank;
  int64_t inner = p.dims[size_t(r - 1)];
  int64_t ia = p.stride_a[size_t(r - 1)], ib = p.stride_b[size_t(r - 1)];
  int64_t rows = p.count / inner;
  auto run_rows = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t oa = 0, ob = 0, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        int64_t i = rem % p.dims[size_t(d)];
        rem /= p.dims[size_t(d)];
        oa += i * p.stride_a[size_t(d)];
        ob += i * p.stride_b[size_t(d)];
      }
      const In* pa = a + oa;
      const In* pb = b + ob;
      Out* po = out + row * inner;
      if (ia == 1 && ib == 1) {
        for (int64_t j = 0; j < inner; ++j)
          po[j] = f(pa[j], pb[j]);
      } else if (ia == 1) {
        In y = *pb;
        for (int64_t j = 0; j < inner; ++j)
          po[j] = f(pa[j], y);
      } else if (ib == 1) {
        In x = *pa;
        for (int64_t j = 0; j < inner; ++j)
          po[j] = f(x, pb[j]);
      } else {
        for (int64_t j = 0; j < inner; ++j)
          po[j] = f(pa[j * ia], pb[j * ib]);
      }
    }
  };
  if (rows == 1) {
    // One long row: split it.
    cpu.parallel_for(inner, elementwise_grain, [&](int64_t begin, int64_t end) {
      const In* pa = a + (ia ? begin : 0);
      const In* pb = b + (ib ? begin : 0);
      Out* po = out + begin;
      int64_t n = end - begin;
      if (ia && ib)
        for (int64_t j = 0; j < n; ++j)
          po[j] = f(pa[j], pb[j]);
      else if (ia)
        for (int64_t j = 0; j < n; ++j)
          po[j] = f(pa[j], *pb);
      else if (ib)
        for (int64_t j = 0; j < n; ++j)
          po[j] = f(*pa, pb[j]);
      else
        for (int64_t j = 0; j < n; ++j)
          po[j] = f(*pa, *pb);
    });
    return;
  }
  cpu.parallel_for(rows, std::max<int64_t>(1, elementwise_grain / inner), run_rows);
}

// Checks of the right-hand input before the loop (integer division by zero and the like).
template <class Op, class T> status check_rhs(const tensor& b) {
  if constexpr (std::is_integral_v<T> &&
                (std::is_same_v<Op, op_div> || std::is_same_v<Op, op_floor_div> ||
                 std::is_same_v<Op, op_mod>)) {
    for (auto v : b.flat<T>())
      if (v == 0)
        return invalid_argument("integer division by zero");
  } else if constexpr (std::is_integral_v<T> && std::is_same_v<Op, op_pow>) {
    for (auto v : b.flat<T>())
      if (v < 0)
        return invalid_argument("integers to negative integer powers are not allowed");
  }
  return {};
}

/// The output shape of a binary op and its broadcasting plan.
struct binary_plan {
  const shape* out = nullptr; ///< an input's shape, or `computed`
  shape computed;
  broadcast_plan plan;
};

/// Plans `a` op `b`. The common cases (equal shapes, or a scalar on one side) copy no shape and
/// compute no broadcast: a node's firing costs a fraction of a microsecond, and this was a tenth
/// of it (perf on node_overhead).
status plan_binary(const tensor& a, const tensor& b, binary_plan& bp) {
  const shape &sa = a.shape(), &sb = b.shape();
  if (sa.rank() == 0 || sb.rank() == 0 || sa == sb) {
    bp.out = sa.rank() == 0 ? &sb : &sa;
    int64_t count = bp.out->num_elements();
    bp.plan.rank = 1;
    bp.plan.count = count;
    bp.plan.dims[0] = std::max<int64_t>(count, 1);
    bp.plan.stride_a[0] = sa.rank() == 0 && count != 1 ? 0 : 1;
    bp.plan.stride_b[0] = sb.rank() == 0 && count != 1 ? 0 : 1;
    return {};
  }
  RUNNEL_ASSIGN_OR_RETURN(bp.computed, broadcast_shapes(sa, sb));
  bp.out = &bp.computed;
  RUNNEL_ASSIGN_OR_RETURN(bp.plan, plan_broadcast(sa, sb, bp.computed));
  return {};
}

/// An element-wise binary kernel. `Compare` ops produce bool; `Types` says which dtypes run.
template <class Op, bool Compare> class binary_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    binary_plan bp;
    RUNNEL_RETURN_IF_ERROR(plan_binary(a, b, bp));
    const shape& out_shape = *bp.out;
    const auto& plan = bp.plan;
    auto run = [&]<class T>() -> status {
      RUNNEL_RETURN_IF_ERROR((check_rhs<Op, T>(b)));
      if constexpr (Compare) {
        tensor& out = ctx.allocate_output(0, dtype::boolean, out_shape);
        run_broadcast(ctx.cpu(), plan, a.data<T>(), b.data<T>(), out.data<bool>(),
                      [](const T& x, const T& y) -> bool { return widen_apply<Op>(x, y); });
      } else {
        tensor& out =
            (a.shape() == out_shape)   ? ctx.forward_or_allocate_output(0, 0, a.type(), out_shape)
            : (b.shape() == out_shape) ? ctx.forward_or_allocate_output(0, 1, a.type(), out_shape)
                                       : ctx.allocate_output(0, a.type(), out_shape);
        run_broadcast(ctx.cpu(), plan, a.data<T>(), b.data<T>(), out.data<T>(),
                      [](T x, T y) -> T { return widen_apply<Op>(x, y); });
      }
      return {};
    };
    switch (a.type()) {
      case dtype::f16:
        return run.template operator()<half>();
      case dtype::bf16:
        return run.template operator()<bfloat16>();
      case dtype::f32:
        return run.template operator()<float>();
      case dtype::f64:
        return run.template operator()<double>();
      case dtype::i32:
        return run.template operator()<int32_t>();
      case dtype::i64:
        return run.template operator()<int64_t>();
      case dtype::boolean:
        if constexpr (Compare)
          return run.template operator()<bool>();
        break;
      case dtype::string:
        if constexpr (std::is_same_v<Op, op_equal> || std::is_same_v<Op, op_not_equal>)
          return run.template operator()<std::string>();
        break;
      default:
        break;
    }
    return unimplemented("unsupported dtype " + std::string(name(a.type())));
  }
};

/// Float-only binary kernels (the gradient helpers) and logical ops compile for fewer types.
template <class Op> class float_binary_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    binary_plan bp;
    RUNNEL_RETURN_IF_ERROR(plan_binary(a, b, bp));
    const shape& out_shape = *bp.out;
    const auto& plan = bp.plan;
    auto run = [&]<class T>() {
      tensor& out = ctx.allocate_output(0, a.type(), out_shape);
      run_broadcast(ctx.cpu(), plan, a.data<T>(), b.data<T>(), out.data<T>(),
                    [](T x, T y) -> T { return widen_apply<Op>(x, y); });
    };
    if (a.type() == dtype::f64)
      run.template operator()<double>();
    else if (a.type() == dtype::f16)
      run.template operator()<half>();
    else if (a.type() == dtype::bf16)
      run.template operator()<bfloat16>();
    else
      run.template operator()<float>();
    return {};
  }
};

template <class Op> class logical_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    binary_plan bp;
    RUNNEL_RETURN_IF_ERROR(plan_binary(a, b, bp));
    const shape& out_shape = *bp.out;
    const auto& plan = bp.plan;
    tensor& out = ctx.allocate_output(0, dtype::boolean, out_shape);
    run_broadcast(ctx.cpu(), plan, a.data<bool>(), b.data<bool>(), out.data<bool>(),
                  [](bool x, bool y) { return Op::template apply<bool>(x, y); });
    return {};
  }
};

class logical_not_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, dtype::boolean, x.shape());
    for (int64_t i = 0; i < x.num_elements(); ++i)
      y.data<bool>()[i] = !x.data<bool>()[i];
    return {};
  }
};

/// Select(condition, t, e): condition of t's shape, a scalar, or a vector over t's first dim.
class select_kernel : public kernel {
public:
  bool reentrant() const override { return true; }
  status compute(kernel_context& ctx) override {
    const tensor& c = ctx.input(0);
    const tensor& t = ctx.input(1);
    const tensor& e = ctx.input(2);
    if (!(t.shape() == e.shape()))
      return invalid_argument("t and e must have the same shape, got " + t.shape().to_string() +
                              " and " + e.shape().to_string());
    bool same = c.shape() == t.shape(), scalar = c.rank() == 0;
    bool rows = c.rank() == 1 && t.rank() >= 1 && c.dim(0) == t.dim(0);
    if (!same && !scalar && !rows)
      return invalid_argument("condition of shape " + c.shape().to_string() +
                              " must match t's shape " + t.shape().to_string() +
                              ", be a scalar, or a vector over its first dimension");
    tensor& out = ctx.allocate_output(0, t.type(), t.shape());
    int64_t n = t.num_elements();
    int64_t row = (rows && t.dim(0) > 0) ? n / t.dim(0) : 1;
    return dispatch(t.type(), [&]<class T>() -> status {
      const bool* cv = c.data<bool>();
      const T* tv = t.data<T>();
      const T* ev = e.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        bool pick = same ? cv[i] : scalar ? cv[0] : cv[i / row];
        o[i] = pick ? tv[i] : ev[i];
      }
      return {};
    });
  }
};
} // namespace

template <class K> kernel_factory factory() {
  return [](const kernel_construction&) {
    return result<std::unique_ptr<kernel>>(std::unique_ptr<kernel>(std::make_unique<K>()));
  };
}

/// The CPU kernel of a row of ops/core/binary_ops.hpp, by its kind.
template <class Row> void add_binary_kernel(kernel_registry& reg, const char* name) {
  using F = typename Row::functor;
  // Binary ops also run natively on 16-bit floats (each element through float).
  static const std::vector<dtype> numbers{dtype::f16, dtype::bf16, dtype::f32,
                                          dtype::f64, dtype::i32,  dtype::i64};
  static const std::vector<dtype> reals{dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
  static const std::vector<dtype> equatable{dtype::f16, dtype::bf16, dtype::f32,     dtype::f64,
                                            dtype::i32, dtype::i64,  dtype::boolean, dtype::string};
  auto cpu = device_type::cpu;
  if constexpr (Row::kind == binary_kind::numbers)
    reg.add(name, cpu, numbers, factory<binary_kernel<F, false>>());
  else if constexpr (Row::kind == binary_kind::compare)
    reg.add(name, cpu, numbers, factory<binary_kernel<F, true>>());
  else if constexpr (Row::kind == binary_kind::equality)
    reg.add(name, cpu, equatable, factory<binary_kernel<F, true>>());
  else if constexpr (Row::kind == binary_kind::logical)
    reg.add(name, cpu, {}, factory<logical_kernel<F>>());
  else
    reg.add(name, cpu, reals, factory<float_binary_kernel<F>>());
}

RUNNEL_KERNEL_FAMILY_PART(math, binary) {
  for (auto& b : binary_ops) // every row of ops/core/binary_ops.hpp
    visit_binary(b.op, [&]<class Row>() { add_binary_kernel<Row>(reg, b.name); });
  reg.add("LogicalNot", device_type::cpu, {}, factory<logical_not_kernel>());
  reg.add("Select", device_type::cpu, {}, factory<select_kernel>());
}

} // namespace runnel
