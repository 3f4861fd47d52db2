#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cpu/adam_dense.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEMPLATE_TEST_CASE("arithmetic kernels broadcast like NumPy", "[ops]", float, double, int32_t,
                   int64_t) {
  using T = TestType;
  graph g;
  auto a = constant(g, vals<T>({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto row = constant(g, vals<T>({3}, {10, 20, 30}));
  auto col = constant(g, vals<T>({2, 1}, {2, 3}));
  auto s = constant(g, tensor::scalar<T>(2));
  auto r = eval({a + row, a - col, a * s, a / col, maximum(a, s), minimum(a, row), pow(a, s), s * a,
                 col + row});
  check_equal(r[0], vals<T>({2, 3}, {11, 22, 33, 14, 25, 36}));
  check_equal(r[1], vals<T>({2, 3}, {-1, 0, 1, 1, 2, 3}));
  check_equal(r[2], vals<T>({2, 3}, {2, 4, 6, 8, 10, 12}));
  if constexpr (std::is_integral_v<T>)
    check_equal(r[3], vals<T>({2, 3}, {0, 1, 1, 1, 1, 2}));
  else
    check_close(r[3], vals<T>({2, 3}, {0.5, 1, 1.5, 4.0 / 3, 5.0 / 3, 2}));
  check_equal(r[4], vals<T>({2, 3}, {2, 2, 3, 4, 5, 6}));
  check_equal(r[5], vals<T>({2, 3}, {1, 2, 3, 4, 5, 6}));
  check_equal(r[6], vals<T>({2, 3}, {1, 4, 9, 16, 25, 36}));
  check_equal(r[7], vals<T>({2, 3}, {2, 4, 6, 8, 10, 12}));
  check_equal(r[8], vals<T>({2, 3}, {12, 22, 32, 13, 23, 33}));
}

TEST_CASE("broadcasting over middle and leading dimensions", "[ops]") {
  graph g;
  std::vector<float> av(24);
  for (int i = 0; i < 24; ++i)
    av[size_t(i)] = float(i);
  auto a = constant(g, vals<float>({2, 3, 4}, av));
  auto mid = constant(g, vals<float>({3, 1}, {100, 200, 300}));
  auto lead = constant(g, vals<float>({2, 1, 1}, {1000, 2000}));
  auto r = eval({a + mid, a + lead});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        int idx = (i * 3 + j) * 4 + k;
        CHECK(r[0].data<float>()[idx] == float(idx + 100 * (j + 1)));
        CHECK(r[1].data<float>()[idx] == float(idx + 1000 * (i + 1)));
      }
}

TEST_CASE("large element-wise ops split across threads give exact results", "[ops]") {
  graph g;
  int64_t n = 1 << 20;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] = float(i % 1000);
    y[size_t(i)] = float(i % 7);
  }
  auto r = eval1(constant(g, vals<float>({n}, x)) + constant(g, vals<float>({n}, y)));
  bool ok = true;
  for (int64_t i = 0; i < n; ++i)
    ok = ok && r.data<float>()[i] == float(i % 1000 + i % 7);
  CHECK(ok);
}

TEST_CASE("comparisons produce bools", "[ops]") {
  graph g;
  auto a = constant(g, {1.f, 2.f, 3.f});
  auto b = constant(g, {2.f, 2.f, 2.f});
  auto r = eval({greater(a, b), less(a, b), equal(a, b),
                 equal(constant(g, tensor::vector<std::string>({"x", "y"})),
                       constant(g, tensor::vector<std::string>({"x", "z"})))});
  check_equal(r[0], tensor::vector<bool>({false, false, true}));
  check_equal(r[1], tensor::vector<bool>({true, false, false}));
  check_equal(r[2], tensor::vector<bool>({false, true, false}));
  check_equal(r[3], tensor::vector<bool>({true, false}));
}

TEST_CASE("unary math kernels", "[ops]") {
  graph g;
  auto x = constant(g, {-1.f, 0.f, 0.5f, 2.f});
  auto p = constant(g, {0.25f, 1.f, 4.f});
  auto r = eval({neg(x), square(x), relu(x), exp(x), tanh(x), sigmoid(x), log(p), sqrt(p)});
  check_equal(r[0], tensor::vector<float>({1, -0.f, -0.5f, -2}));
  check_equal(r[1], tensor::vector<float>({1, 0, 0.25f, 4}));
  check_equal(r[2], tensor::vector<float>({0, 0, 0.5f, 2}));
  check_close(r[3], tensor::vector<float>({std::exp(-1.f), 1, std::exp(0.5f), std::exp(2.f)}));
  check_close(r[4], tensor::vector<float>({std::tanh(-1.f), 0, std::tanh(0.5f), std::tanh(2.f)}));
  check_close(r[5], tensor::vector<float>({1 / (1 + std::exp(1.f)), 0.5f, 1 / (1 + std::exp(-0.5f)),
                                           1 / (1 + std::exp(-2.f))}));
  check_close(r[6], tensor::vector<float>({std::log(0.25f), 0, std::log(4.f)}));
  check_close(r[7], tensor::vector<float>({0.5f, 1, 2}));
  // Rows added through ops/core/unary_ops.hpp alone, against TensorFlow's values.
  auto s = eval({apply_unary(unary_op::Softsign, x), apply_unary(unary_op::Selu, x),
                 apply_unary(unary_op::Erf, x)});
  check_close(s[0], tensor::vector<float>({-0.5f, 0, 1 / 3.f, 2 / 3.f}));
  check_close(s[1], tensor::vector<float>({-1.1113307f, 0, 0.52535025f, 2.101402f}));
  check_close(s[2], tensor::vector<float>({-0.84270079f, 0, 0.52049988f, 0.99532227f}));
  // A row added through ops/core/binary_ops.hpp: atan2(y, x) in every quadrant, on the axes and
  // at signed zeros (TensorFlow's values: std::atan2), broadcast against one x.
  auto y = constant(g, {1.f, 1.f, -1.f, -1.f, 0.f, -0.f, 1.f, 0.f});
  auto x2 = constant(g, {1.f, -1.f, -1.f, 1.f, -1.f, -1.f, 0.f, 0.f});
  auto at = eval({apply_binary(binary_op::Atan2, y, x2),
                  apply_binary(binary_op::Atan2, constant(g, {2.f, -2.f}), constant(g, 2.f))});
  float pi = 3.14159265f;
  check_close(
      at[0], tensor::vector<float>({pi / 4, 3 * pi / 4, -3 * pi / 4, -pi / 4, pi, -pi, pi / 2, 0}));
  check_close(at[1], tensor::vector<float>({pi / 4, -pi / 4}));
  auto i = eval({neg(constant(g, {3, -4})), relu(constant(g, {3, -4}))});
  check_equal(i[0], tensor::vector<int32_t>({-3, 4}));
  check_equal(i[1], tensor::vector<int32_t>({3, 0}));
}

TEST_CASE("NaN propagates through Maximum and Minimum", "[ops]") {
  graph g;
  auto a = constant(g, {NAN, 1.f});
  auto b = constant(g, {0.f, NAN});
  auto r = eval({maximum(a, b), minimum(a, b)});
  CHECK(std::isnan(r[0].data<float>()[0]));
  CHECK(std::isnan(r[0].data<float>()[1]));
  CHECK(std::isnan(r[1].data<float>()[1]));
}

TEST_CASE("integer division by zero and negative powers are errors naming the node", "[ops]") {
  graph g;
  auto s = eval_error(div(constant(g, {1, 2}), constant(g, {1, 0}), "ratio"));
  CHECK(s.code() == error_code::invalid_argument);
  CHECK(s.message() == "node 'ratio' (op Div): integer division by zero");
  auto p = eval_error(pow(constant(g, {2}), constant(g, {-1})));
  CHECK(p.message().find("negative integer powers") != std::string::npos);
  auto f = eval1(constant(g, {1.f}) / constant(g, {0.f}));
  CHECK(std::isinf(f.data<float>()[0]));
}

TEST_CASE("Cast converts between all numeric types and bool", "[ops]") {
  graph g;
  auto x = constant(g, {-1.7f, 0.f, 2.5f});
  auto r = eval({cast(x, dtype::i32), cast(x, dtype::boolean), cast(x, dtype::f64),
                 cast(cast(x, dtype::f16), dtype::f32), cast(cast(x, dtype::bf16), dtype::f32),
                 cast(constant(g, {true, false}), dtype::f32), cast(x, dtype::f32)});
  check_equal(r[0], tensor::vector<int32_t>({-1, 0, 2}));
  check_equal(r[1], tensor::vector<bool>({true, false, true}));
  check_close(r[2], tensor::vector<double>({-1.7, 0, 2.5}), 1e-6);
  check_close(r[3], tensor::vector<float>({-1.7f, 0, 2.5f}), 1e-3);
  check_close(r[4], tensor::vector<float>({-1.7f, 0, 2.5f}), 1e-2);
  check_equal(r[5], tensor::vector<float>({1, 0}));
  check_equal(r[6], tensor::vector<float>({-1.7f, 0, 2.5f}));
}

TEST_CASE("AddN sums same-shaped inputs and rejects broadcasting", "[ops]") {
  graph g;
  auto a = constant(g, {1.f, 2.f});
  auto r = eval1(add_n({a, a, constant(g, {10.f, 20.f})}));
  check_equal(r, tensor::vector<float>({12, 24}));
  CHECK_THROWS_AS(add_n({a, constant(g, {1.f, 2.f, 3.f})}), runnel::error);
}

TEST_CASE("MatMul with transposes matches a hand computation", "[ops]") {
  graph g;
  auto a = constant(g, {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});      // [2,3]
  auto b = constant(g, {{7.f, 8.f}, {9.f, 10.f}, {11.f, 12.f}}); // [3,2]
  auto r = eval({matmul(a, b), matmul(a, a, {.transpose_a = true}),
                 matmul(a, a, {.transpose_b = true}), matmul(b, a, {true, true})});
  check_equal(r[0], vals<float>({2, 2}, {58, 64, 139, 154}));
  check_equal(r[1], vals<float>({3, 3}, {17, 22, 27, 22, 29, 36, 27, 36, 45}));
  check_equal(r[2], vals<float>({2, 2}, {14, 32, 32, 77}));
  check_equal(r[3], vals<float>({2, 2}, {58, 139, 64, 154}));
  auto d = eval1(matmul(cast(a, dtype::f64), cast(b, dtype::f64)));
  check_equal(d, vals<double>({2, 2}, {58, 64, 139, 154}));
}

TEST_CASE("MatMul shape mismatch at run time names the node", "[ops]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, -1}, "x");
  auto y = matmul(x, constant(g, {{1.f}, {2.f}}), {}, "mm");
  auto s = eval_error(y, {{x, vals<float>({1, 3}, {1, 2, 3})}});
  CHECK(s.message().find("node 'mm' (op MatMul): matrix size-incompatible") != std::string::npos);
}

TEST_CASE("reductions over axes with and without keep_dims", "[ops]") {
  graph g;
  auto a = constant(g, vals<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto r = eval({sum(a), sum(a, {0}), sum(a, {1}, true), mean(a, {1}), reduce_max(a, {0}),
                 reduce_max(a), mean(a), sum(a, {-1}), argmax(a, 0), argmax(a, 1, dtype::i32)});
  check_equal(r[0], tensor::scalar<float>(21));
  check_equal(r[1], tensor::vector<float>({5, 7, 9}));
  check_equal(r[2], vals<float>({2, 1}, {6, 15}));
  check_equal(r[3], tensor::vector<float>({2, 5}));
  check_equal(r[4], tensor::vector<float>({4, 5, 6}));
  check_equal(r[5], tensor::scalar<float>(6));
  check_equal(r[6], tensor::scalar<float>(3.5f));
  check_equal(r[7], tensor::vector<float>({6, 15}));
  check_equal(r[8], tensor::vector<int64_t>({1, 1, 1}));
  check_equal(r[9], tensor::vector<int32_t>({2, 2}));
}

TEST_CASE("Min, Prod, All, Any and ArgMin", "[ops]") {
  graph g;
  auto a = constant(g, vals<float>({2, 3}, {4, 2, 3, 1, 5, 6}));
  auto b = constant(g, vals<bool>({2, 2}, {true, false, true, true}));
  auto r = eval({reduce_min(a, {1}), reduce_min(a), reduce_prod(a, {0}), reduce_all(b, {1}),
                 reduce_any(b, {0}), reduce_all(b), argmin(a, 1), argmin(a, 0, dtype::i32)});
  check_equal(r[0], tensor::vector<float>({2, 1}));
  check_equal(r[1], tensor::scalar<float>(1));
  check_equal(r[2], tensor::vector<float>({4, 10, 18}));
  check_equal(r[3], tensor::vector<bool>({false, true}));
  check_equal(r[4], tensor::vector<bool>({true, true}));
  check_equal(r[5], tensor::scalar<bool>(false));
  check_equal(r[6], tensor::vector<int64_t>({1, 0}));
  check_equal(r[7], tensor::vector<int32_t>({1, 0, 0}));
}

TEST_CASE("reductions over non-adjacent axes of a rank-3 tensor", "[ops]") {
  graph g;
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i)
    v[size_t(i)] = i;
  auto a = constant(g, vals<int32_t>({2, 3, 4}, v));
  auto r = eval({sum(a, {0, 2}), reduce_max(a, {0, 2}, true), mean(a, {1})});
  // sum over i,k of (12i + 4j + k) = 8*4j + (0+12)*4 + 2*6 = 16j... computed directly below
  std::vector<int32_t> expect(3, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        expect[size_t(j)] += 12 * i + 4 * j + k;
  check_equal(r[0], tensor::vector<int32_t>(expect));
  check_equal(r[1], vals<int32_t>({1, 3, 1}, {15, 19, 23}));
  check_equal(r[2], vals<int32_t>({2, 4}, {4, 5, 6, 7, 16, 17, 18, 19}));
}

TEST_CASE("Adam's vectorized dense update gives the bits of the scalar rule, tails included",
          "[ops]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t n : {1, 7, 16, 17, 1000, 4099}) {
    for (bool nesterov : {false, true}) {
      CAPTURE(n, nesterov);
      const auto len = static_cast<size_t>(n);
      std::vector<float> var(len), m(len), v(len), g(len);
      for (int64_t i = 0; i < n; ++i) {
        var[size_t(i)] = normal(rng), m[size_t(i)] = normal(rng) * 0.1f,
        v[size_t(i)] = std::abs(normal(rng)) * 0.01f, g[size_t(i)] = normal(rng);
      }
      auto rvar = var, rm = m, rv = v;
      const float lr_t = 0.00123f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
      adam_dense_f32(var.data(), m.data(), v.data(), g.data(), n, lr_t, b1, b2, eps, nesterov);
      for (size_t i = 0; i < size_t(n); ++i) { // the scalar rule of ops/cpu/training.cpp
        rm[i] += (g[i] - rm[i]) * (1.f - b1);
        rv[i] += (g[i] * g[i] - rv[i]) * (1.f - b2);
        float step = nesterov ? rm[i] * b1 + (1.f - b1) * g[i] : rm[i];
        rvar[i] -= lr_t * step / (std::sqrt(rv[i]) + eps);
      }
      CHECK(std::memcmp(var.data(), rvar.data(), size_t(n) * 4) == 0);
      CHECK(std::memcmp(m.data(), rm.data(), size_t(n) * 4) == 0);
      CHECK(std::memcmp(v.data(), rv.data(), size_t(n) * 4) == 0);
    }
  }
}

TEST_CASE("the unary rows' wide-vector variants agree with the scalar functors", "[ops]") {
  using variant = void (*)(unary_op, const float*, float*, int64_t);
  std::vector<std::pair<std::string, variant>> variants;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    CHECK(std::string(unary_wide_isa()) != ""); // every machine of ours has AVX2 at least
    variants.emplace_back("avx2", avx2::unary_f32);
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    variants.emplace_back("avx512", avx512::unary_f32);
#endif
  variants.emplace_back("chosen", [](unary_op op, const float* x, float* y, int64_t n) {
    if (!unary_f32_wide(op, x, y, n))
      visit_unary(op, [&]<class F>() {
        for (int64_t i = 0; i < n; ++i)
          y[i] = F::apply(x[i]);
      });
  });
  // Values across each function's domain, with a length that leaves a partial vector at the end.
  std::vector<float> x;
  for (int i = 0; i < 1003; ++i)
    x.push_back(-12.f + 24.f * float(i) / 1002.f);
  for (auto& [isa, run] : variants)
    for (auto& row : unary_ops) {
      INFO(isa << " " << row.name);
      std::vector<float> in = x;
      if (row.op == unary_op::Log || row.op == unary_op::Sqrt || row.op == unary_op::Rsqrt ||
          row.op == unary_op::Log1p)
        for (auto& v : in)
          v = std::abs(v) + 0.01f;
      std::vector<float> y(in.size(), -7.f);
      run(row.op, in.data(), y.data(), int64_t(in.size()));
      visit_unary(row.op, [&]<class F>() {
        for (size_t i = 0; i < in.size(); ++i) {
          INFO("x = " << in[i]);
          CHECK(y[i] == Approx(F::apply(in[i])).epsilon(2e-6).margin(2e-7));
        }
      });
    }
}
