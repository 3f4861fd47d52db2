// The op tables checked against each other on every machine (CUDA or not): every defined op has
// a CPU kernel or a stated reason, every name in the GPU list and the fusion interpreter's table
// is a defined op, and the interpreter computes each of its ops as the op's own kernel does (a
// case it forgot would return garbage, not an error).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "../eval.hpp"
#include "runnel/actors/exec/internal.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/defs/families.hpp"
#include "runnel/ops/gpu/accelerator.hpp"
#include "runnel/ops/grad/families.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Defined ops that no CPU kernel computes, each with why.
const std::map<std::string, std::string> no_cpu_kernel = {};

std::set<std::string> cpu_kernel_ops() {
  std::set<std::string> ops;
  for (auto& r : runtime_kernels().registrations())
    if (r.device == device_type::cpu)
      ops.insert(r.op);
  return ops;
}

} // namespace

TEST_CASE("every defined op has a CPU kernel or a stated reason", "[ops][coverage]") {
  auto kernels = cpu_kernel_ops();
  std::vector<std::string> missing, stale;
  for (auto& op : builtin_ops().names())
    if (!kernels.count(op) && !no_cpu_kernel.count(op))
      missing.push_back(op);
  for (auto& [op, why] : no_cpu_kernel)
    if (kernels.count(op) || !builtin_ops().find(op))
      stale.push_back(op);
  std::string m;
  for (auto& op : missing)
    m += op + " ";
  INFO("ops without a CPU kernel or a reason: " << m);
  CHECK(missing.empty());
  std::string s;
  for (auto& op : stale)
    s += op + " ";
  INFO("reasons for ops that have a CPU kernel or are not defined: " << s);
  CHECK(stale.empty());
}

TEST_CASE("the GPU list and the fusion table name defined ops with CPU kernels",
          "[ops][coverage]") {
  auto kernels = cpu_kernel_ops();
  for (auto& g : gpu_kernel_ops()) {
    INFO("GPU list: " << g.op);
    CHECK(builtin_ops().find(g.op) != nullptr);
  }
  for (auto& op : fused_elementwise_ops()) {
    INFO("fusion table: " << op);
    CHECK(builtin_ops().find(op) != nullptr);
    CHECK(kernels.count(op) == 1);
  }
}

TEST_CASE("the fusion interpreter computes each of its ops as the op's kernel does",
          "[ops][coverage]") {
  std::mt19937 rng(39);
  // Magnitudes in [0.25, 2) of either sign; the logarithms and roots get the magnitudes.
  std::uniform_real_distribution<float> u(0.25f, 2.f);
  std::bernoulli_distribution negative(0.5);
  tensor a(dtype::f32, shape{1000}), b(dtype::f32, shape{1000}), positive(dtype::f32, shape{1000});
  for (size_t i = 0; i < 1000; ++i) {
    positive.flat<float>()[i] = u(rng);
    a.flat<float>()[i] = negative(rng) ? -positive.flat<float>()[i] : positive.flat<float>()[i];
    b.flat<float>()[i] = negative(rng) ? -u(rng) : u(rng);
  }
  for (auto& op : fused_elementwise_ops()) {
    INFO("op " << op);
    graph g;
    auto x = placeholder(g, dtype::f32, {1000}, "x");
    auto y = placeholder(g, dtype::f32, {1000}, "y");
    const op_def* def = builtin_ops().find(op);
    REQUIRE(def != nullptr);
    bool binary = def->inputs.size() == 2;
    std::vector<endpoint> in{x.ep()};
    if (binary)
      in.push_back(y.ep());
    auto want = g.build(op, "want", in)[0];
    auto got = g.build("_FusedElementwise", "got", in,
                       {{"N", int64_t(in.size())},
                        {"ops", std::vector<std::string>{op}},
                        {"operands", std::vector<int64_t>{0, binary ? 1 : -1}},
                        {"out_shape", shape{1000}}})[0];
    bool domain = op == "Log" || op == "Sqrt" || op == "Rsqrt" || op == "Log1p";
    auto r = eval({want, got}, {{x, domain ? positive : a}, {y, b}});
    auto w = r[0].flat<float>(), o = r[1].flat<float>();
    for (size_t i = 0; i < w.size(); ++i)
      REQUIRE(o[i] == Approx(w[i]).epsilon(1e-5).margin(1e-6));
  }
}

TEST_CASE("the fusion interpreter broadcasts its inputs as the ops do", "[ops][coverage]") {
  // Shapes that take its general broadcast (neither the output's shape, a scalar nor its
  // trailing dimensions), some over several of its 512-element blocks, one of rank 8.
  std::vector<std::pair<shape, shape>> cases{
      {shape{3, 1, 5}, shape{4, 1}},        {shape{64, 1}, shape{64, 300}},
      {shape{2, 1}, shape{1, 3}},           {shape{7, 1, 40}, shape{1, 9, 1}},
      {shape{1, 33, 1}, shape{17, 33, 19}}, {shape{2, 1, 2, 1, 2, 1, 1, 3}, shape{5, 1, 3}}};
  std::mt19937 rng(40);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (auto& [sa, sb] : cases) {
    INFO(sa.to_string() << " * " << sb.to_string());
    tensor a(dtype::f32, sa), b(dtype::f32, sb);
    for (auto& v : a.flat<float>())
      v = u(rng);
    for (auto& v : b.flat<float>())
      v = u(rng);
    graph g;
    auto x = placeholder(g, dtype::f32, sa, "x");
    auto y = placeholder(g, dtype::f32, sb, "y");
    auto want = g.build("Sub", "want", {x.ep(), y.ep()})[0];
    auto got = g.build("_FusedElementwise", "got", {x.ep(), y.ep()},
                       {{"N", int64_t(2)},
                        {"ops", std::vector<std::string>{"Sub"}},
                        {"operands", std::vector<int64_t>{0, 1}},
                        {"out_shape", shape::unknown()}})[0];
    auto r = eval({want, got}, {{x, a}, {y, b}});
    REQUIRE(r[1].shape() == r[0].shape());
    auto w = r[0].flat<float>(), o = r[1].flat<float>();
    for (size_t i = 0; i < w.size(); ++i)
      REQUIRE(o[i] == w[i]);
  }
}

TEST_CASE("each unary row's element functor (what the GPU runs) matches its CPU kernel",
          "[ops][coverage]") {
  // The CPU kernel computes through the functor's Eigen form, the CUDA kernel through `apply`:
  // here both, for every row of ops/core/unary_ops.hpp, on float32 and float64.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (auto& row : unary_ops)
    for (dtype t : {dtype::f32, dtype::f64}) {
      INFO("op " << row.name << " " << name(t));
      bool domain = row.op == unary_op::Log || row.op == unary_op::Sqrt ||
                    row.op == unary_op::Rsqrt || row.op == unary_op::Log1p;
      tensor x(t, shape{257});
      for (int64_t i = 0; i < 257; ++i) {
        double v = domain ? std::abs(u(rng)) + 1e-3 : u(rng);
        if (t == dtype::f32)
          x.flat<float>()[size_t(i)] = float(v);
        else
          x.flat<double>()[size_t(i)] = v;
      }
      graph g;
      auto got = eval1(g.build(row.name, "y", {constant(g, x).ep()})[0]);
      for (int64_t i = 0; i < 257; ++i)
        visit_unary(row.op, [&]<class F>() {
          if (t == dtype::f32)
            REQUIRE(got.flat<float>()[size_t(i)] ==
                    Approx(F::apply(x.flat<float>()[size_t(i)])).epsilon(1e-5).margin(1e-6));
          else
            REQUIRE(got.flat<double>()[size_t(i)] ==
                    Approx(F::apply(x.flat<double>()[size_t(i)])).epsilon(1e-12).margin(1e-12));
        });
    }
}

TEST_CASE("each fused activation in _FusedMatMul computes as MatMul, BiasAdd and the activation",
          "[ops][coverage]") {
  // The remapper (ops/optimize/remap.cpp), the op definition and the kernel all read
  // fused_activations; here every entry, and none, against the unfused ops.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  tensor a(dtype::f32, shape{5, 7}), w(dtype::f32, shape{7, 3}), bias(dtype::f32, shape{3});
  for (tensor* t : {&a, &w, &bias})
    for (auto& v : t->flat<float>())
      v = 2 * u(rng);
  std::vector<std::string> activations{""};
  for (unary_op act : fused_activations)
    activations.push_back(unary_ops[int(act)].name);
  for (auto& act : activations) {
    INFO("activation '" << act << "'");
    graph g;
    auto x = constant(g, a), wc = constant(g, w), bc = constant(g, bias);
    auto unfused = bias_add(matmul(x, wc), bc);
    if (!act.empty())
      unfused = g.build(act, "act", {unfused.ep()})[0];
    auto fused =
        g.build("_FusedMatMul", "fused", {x.ep(), wc.ep(), bc.ep()}, {{"activation", act}})[0];
    auto r = eval({unfused, fused});
    auto want = r[0].flat<float>(), got = r[1].flat<float>();
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i)
      REQUIRE(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
  }
  graph g;
  auto x = constant(g, a);
  auto bad = g.add_op("_FusedMatMul", "bad", {x.ep(), constant(g, w).ep(), constant(g, bias).ep()},
                      {{"activation", std::string("Softsign")}});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("unknown activation 'Softsign'") &&
                                        Catch::Contains("Relu, Relu6, Elu, Tanh, Sigmoid"));
}

TEST_CASE("no two kernels of an op on one device claim the same type", "[ops][coverage]") {
  // The families register in the order the build lists them, so which one a lookup finds must
  // not depend on that order: an op's kernels on a device take disjoint types (an untyped kernel
  // is the op's only one there).
  std::map<std::pair<std::string, device_type>, std::vector<std::vector<dtype>>> seen;
  for (auto& r : runtime_kernels().registrations())
    seen[{r.op, r.device}].push_back(r.types);
  for (auto& [key, lists] : seen) {
    INFO("op " << key.first << " on " << (key.second == device_type::cpu ? "CPU" : "GPU"));
    std::set<dtype> claimed;
    size_t total = 0;
    for (auto& types : lists) {
      CHECK((!types.empty() || lists.size() == 1));
      claimed.insert(types.begin(), types.end());
      total += types.size();
    }
    CHECK(claimed.size() == total);
  }
}

// Each op's CPU kernels and its gradient function (or its mark of having none) are registered
// by a family of the same name as the one that defines it: `defs/F_ops.cpp`, `cpu/F.cpp` (or
// parts of F) and `grad/F_grad.cpp`, so everything about an op is found from its family's name.
TEST_CASE("an op's kernels and gradient belong to the family that defines it", "[ops][coverage]") {
  auto defs = builtin_op_families();
  auto check = [&](const std::map<std::string, std::string>& layer, std::string what) {
    for (auto& [op, name] : layer) {
      INFO(what << " of " << op);
      REQUIRE(defs.count(op) == 1);
      if (name != defs[op])
        FAIL_CHECK(what << "/" << name << " registers " << op << ", which defs/" << defs[op]
                        << " defines: name the families alike");
    }
  };
  check(builtin_kernel_families(), "cpu");
  check(builtin_gradient_families(), "grad");
}
