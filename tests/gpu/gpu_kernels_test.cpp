// CUDA kernels against the CPU kernels on random inputs. Tagged [.gpu]: they need a GPU, so
// plain runs skip them; scripts/gpu-check runs them on a GPU machine. The [gpu_host] cases run
// everywhere (CI included): they check what happens without a GPU.
#include <cmath>
#include <fstream>
#include <functional>

#include <algorithm>

#include "runnel/actors/exec/runtime.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/cuda/cublas_api.hpp"
#include "runnel/ops/cuda/cuda_accelerator.hpp"
#include "runnel/ops/defs/families.hpp"
#include "runnel/ops/gpu/accelerator.hpp"
#include "runnel/tests/gpu/gpu_test_util.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("without a GPU a context cannot be made, and says why", "[gpu_host]") {
  auto& found = discover_gpus();
  CHECK(found.built_with_cuda);
  auto ctx = gpu_context::create(int(found.gpus.size())); // one past the last GPU
  REQUIRE_FALSE(ctx.ok());
  CHECK(ctx.error().code() == error_code::unavailable);
  CHECK_THAT(ctx.error().to_string(), Catch::Contains("GPU " + std::to_string(found.gpus.size())));
}

namespace {
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos)
      return true;
  return false;
}
} // namespace

TEST_CASE("cuBLAS is loaded when a GPU context needs it, not at start-up", "[gpu_host]") {
  // Linking libcublas cost every Runnel process 0.5-1 s at start-up, GPU or not. A runtime that
  // uses no GPU never loads it (one with a GPU does, when it makes the GPU's context).
  if (!cublas_loaded()) {
    graph g;
    auto y = constant(g, 2.f) * 3.0;
    runtime rt(runtime_options{.visible_gpus = std::vector<int>{}});
    session s(rt, g);
    REQUIRE(s.run({}, {y}).ok());
    CHECK_FALSE(mapped("libcublas"));
  }
  auto api = load_cublas();
  REQUIRE(api.ok()); // the toolkit is installed wherever this is built
  CHECK(mapped("libcublas"));
  CHECK_THAT((*api)->path, Catch::Contains("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)));
  for (bool resolved :
       {(*api)->create != nullptr, (*api)->destroy != nullptr, (*api)->set_stream != nullptr,
        (*api)->sgemm != nullptr, (*api)->gemm_ex != nullptr, (*api)->status_string != nullptr})
    CHECK(resolved);
  CHECK(std::string((*api)->status_string(CUBLAS_STATUS_NOT_INITIALIZED)).size() > 0);
  CHECK(load_cublas().value() == *api); // once per process
}

TEST_CASE("the CUDA kernel table and the GPU op list name the same ops", "[gpu_host]") {
  // Placement reads gpu_kernel_ops(); the CUDA accelerator builds kernels from its table. An op
  // in one but not the other would be placed on a GPU that cannot run it, or never placed there.
  std::vector<std::string> listed, built = cuda_kernel_op_names();
  for (auto& op : gpu_kernel_ops())
    listed.push_back(op.op);
  std::sort(listed.begin(), listed.end());
  std::sort(built.begin(), built.end());
  CHECK(std::adjacent_find(listed.begin(), listed.end()) == listed.end());
  CHECK(listed == built);
  std::vector<std::string> missing, extra;
  std::set_difference(listed.begin(), listed.end(), built.begin(), built.end(),
                      std::back_inserter(missing));
  std::set_difference(built.begin(), built.end(), listed.begin(), listed.end(),
                      std::back_inserter(extra));
  for (auto& op : missing)
    FAIL_CHECK("listed for placement without a CUDA kernel: " << op);
  for (auto& op : extra)
    FAIL_CHECK("a CUDA kernel not listed for placement: " << op);
  // Every listed op is a defined op.
  for (auto& op : listed)
    CHECK(builtin_ops().find(op) != nullptr);
}

TEST_CASE("an op's CUDA kernel belongs to the family that defines it", "[gpu_host]") {
  // As the CPU kernels and gradients do (op_coverage_test): RUNNEL_CUDA_KERNEL_FAMILY(F) in
  // ops/cuda/ registers only ops that ops/defs/F_ops.cpp defines.
  auto defs = builtin_op_families();
  auto cuda = builtin_cuda_kernel_families();
  CHECK(cuda.size() == cuda_kernel_op_names().size());
  for (auto& [op, family] : cuda) {
    INFO("the CUDA kernel of " << op);
    REQUIRE(defs.count(op) == 1);
    if (family != defs[op])
      FAIL_CHECK("cuda/" << family << " registers " << op << ", which defs/" << defs[op]
                         << " defines: name the families alike");
  }
}

TEST_CASE("GPU fills, selects, AddN and Floor match the CPU", "[.gpu]") {
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16, dtype::i32}) {
    INFO(name(t));
    tensor out;
    REQUIRE(fill_cuda(gpu(), t, shape{3, 1000}, 1.0, &out, "fill").ok());
    graph g;
    check_matches(
        back(out),
        eval1(cast(fill(constant(g, tensor::vector<int32_t>({3, 1000})), constant(g, 1.0f)), t)), 0,
        0);
    auto a = random_host(t, {40, 30}, 1), b = random_host(t, {40, 30}, 2),
         c = random_host(t, {40, 30}, 3);
    std::vector<tensor> xs{on_gpu(a), on_gpu(b), on_gpu(c)};
    REQUIRE(add_n_cuda(gpu(), xs, &out, "add_n").ok());
    auto wide = [&](const tensor& v) { return cast(constant(g, v), dtype::f64); };
    check_matches(back(out), eval1(cast(wide(a) + wide(b) + wide(c), t)), tolerance(t) * 4, 1e-3);
    for (auto cond_shape : {shape{40, 30}, shape{40}, shape{}}) {
      auto cond =
          eval1(greater(constant(g, random_host(dtype::f32, cond_shape, 4)), constant(g, 0.f)));
      REQUIRE(select_cuda(gpu(), on_gpu(cond), on_gpu(a), on_gpu(b), &out, "select").ok());
      check_equal(back(out), eval1(select(constant(g, cond), constant(g, a), constant(g, b))));
    }
  }
  for (dtype t : {dtype::f32, dtype::f16}) {
    auto x = random_host(t, {999}, 5, -5, 5);
    tensor out;
    REQUIRE(unary_cuda(gpu(), unary_op::Floor, on_gpu(x), &out, "floor").ok());
    graph g;
    auto wide = cast(constant(g, x), dtype::f32);
    check_matches(back(out), eval1(cast(g.build("Floor", "Floor", {wide.ep()})[0], t)), 0, 0);
  }
}

TEST_CASE("GPU binary ops match the CPU, broadcasting included", "[.gpu]") {
  // Every row of ops/core/binary_ops.hpp with a CUDA kernel.
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16, dtype::i32})
    for (auto& [sa, sb] : std::vector<std::pair<shape, shape>>{
             {{1000, 37}, {1000, 37}}, {{64, 1, 33}, {7, 1}}, {{5, 6}, {}}})
      for (auto& row : binary_ops) {
        if (row.devices == binary_devices::cpu ||
            (t == dtype::i32 && gpu_floats_only(row.kind, row.devices)))
          continue; // integer Div stays on the CPU (zero checks)
        INFO(name(t) << " " << sa.to_string() << " op " << row.name);
        bool positive_rhs = row.op == binary_op::Div;
        auto a = random_host(t, sa, 1), b = random_host(t, sb, 2, positive_rhs ? 0.5 : -2, 2);
        tensor out;
        REQUIRE(binary_cuda(gpu(), row.op, on_gpu(a), on_gpu(b), &out, "binary").ok());
        graph g;
        // The CPU compares float16 and bfloat16 through float32 (exactly: widening is exact).
        bool compare = row.kind != binary_kind::numbers && row.kind != binary_kind::reals;
        bool narrow = t == dtype::f16 || t == dtype::bf16;
        output ca = constant(g, a), cb = constant(g, b);
        if (compare && narrow)
          ca = cast(ca, dtype::f32), cb = cast(cb, dtype::f32);
        auto want = eval1(g.build(row.name, "want", {ca.ep(), cb.ep()})[0]);
        check_matches(back(out), want, tolerance(t));
      }
}

TEST_CASE("GPU unary ops and casts match the CPU", "[.gpu]") {
  // Every row of ops/core/unary_ops.hpp; the logarithms and roots read |x|.
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16})
    for (auto& u : unary_ops) {
      INFO(name(t) << " op " << u.name);
      bool domain = u.op == unary_op::Log || u.op == unary_op::Sqrt || u.op == unary_op::Rsqrt;
      auto x = random_host(t, {4097}, 3);
      tensor in = on_gpu(x), out;
      if (domain)
        REQUIRE(unary_cuda(gpu(), unary_op::Abs, on_gpu(x), &in, "abs").ok());
      REQUIRE(unary_cuda(gpu(), u.op, in, &out, "unary").ok());
      graph g;
      auto cx = constant(g, x);
      auto want = eval1(g.build(u.name, "want", {(domain ? abs(cx) : cx).ep()})[0]);
      check_matches(back(out), want, tolerance(t) * 4, 1e-3);
    }
  for (dtype from : {dtype::f32, dtype::f16, dtype::bf16, dtype::i32})
    for (dtype to : {dtype::f32, dtype::f16, dtype::bf16, dtype::f64}) {
      INFO(name(from) << " -> " << name(to));
      auto x = random_host(from, {1000}, 4);
      tensor out;
      REQUIRE(cast_cuda(gpu(), on_gpu(x), to, &out, "cast").ok());
      graph g;
      check_equal(back(out), eval1(cast(constant(g, x), to)));
    }
}

TEST_CASE("GPU MatMul matches the CPU for every transpose and precision", "[.gpu]") {
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16})
    for (bool tf32 : {false, true})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          if (tf32 && t != dtype::f32)
            continue;
          INFO(name(t) << " tf32=" << tf32 << " ta=" << ta << " tb=" << tb);
          auto a = random_host(t, ta ? shape{300, 129} : shape{129, 300}, 5);
          auto b = random_host(t, tb ? shape{65, 300} : shape{300, 65}, 6);
          tensor out;
          REQUIRE(matmul_cuda(gpu(), on_gpu(a), on_gpu(b),
                              {.transpose_a = ta, .transpose_b = tb, .allow_tf32 = tf32}, &out,
                              "mm")
                      .ok());
          // The reference: the same inputs in float64 on the CPU.
          graph g;
          auto want =
              eval1(matmul(cast(constant(g, a), dtype::f64), cast(constant(g, b), dtype::f64),
                           {.transpose_a = ta, .transpose_b = tb}));
          double rtol = tf32 ? 5e-3 : t == dtype::f64 ? 1e-12 : t == dtype::f32 ? 1e-4 : 2e-2;
          check_matches(back(out), want, rtol, 0.05);
        }
  tensor out;
  auto bad = matmul_cuda(gpu(), on_gpu(random_host(dtype::f32, {3, 4}, 7)),
                         on_gpu(random_host(dtype::f32, {5, 6}, 8)), {}, &out, "dense/MatMul");
  CHECK_THAT(bad.to_string(), Catch::Contains("dense/MatMul") && Catch::Contains("[3,4]"));
}

TEST_CASE(
    "GPU memory: the limit gives resource_exhausted naming the node, and the GPU stays usable",
    "[.gpu]") {
  auto small = gpu_context::create(0, size_t(256) << 20).value();
  auto r = small->allocate(dtype::f32, shape{int64_t(1) << 27}, "huge/Conv2D"); // 512 MiB
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::resource_exhausted);
  CHECK_THAT(r.error().to_string(), Catch::Contains("huge/Conv2D") && Catch::Contains("GPU:0"));
  auto x = small->to_device(tensor::vector<float>({1, -2, 3})).value();
  CHECK(x.memory() == memory_space::device);
  CHECK(x.memory_name() == "GPU:0 memory");
  tensor y;
  REQUIRE(unary_cuda(*small, unary_op::Relu, x, &y, "relu").ok());
  check_equal(small->to_host(y).value(), tensor::vector<float>({1, 0, 3}));
  CHECK(small->synchronize().ok());
  CHECK(small->allocator().stats().peak_bytes_in_use > 0);
}

TEST_CASE("host tensors are refused by GPU kernels with the input named", "[.gpu]") {
  tensor out;
  auto st = binary_cuda(gpu(), binary_op::Add, tensor::vector<float>({1}),
                        on_gpu(tensor::vector<float>({1})), &out, "add");
  CHECK_THAT(st.to_string(), Catch::Contains("input 0") && Catch::Contains("host memory"));
}

TEST_CASE("GPU NN kernels match the CPU", "[.gpu]") {
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16}) {
    INFO(name(t));
    auto value = random_host(t, {300, 37}, 9), bias = random_host(t, {37}, 10);
    graph g;
    tensor out;
    REQUIRE(bias_add_cuda(gpu(), on_gpu(value), on_gpu(bias), &out, "bias_add").ok());
    check_matches(back(out), eval1(bias_add(constant(g, value), constant(g, bias))), tolerance(t));
    // BiasAddGrad: one chunk of rows, many chunks (a conv layer's gradient, 4-D), few rows,
    // columns past a block's 32, no rows.
    for (shape s :
         {shape{300, 37}, shape{4, 28, 28, 32}, shape{20000, 3}, shape{5, 70}, shape{0, 4}}) {
      INFO("BiasAddGrad of " << s.to_string());
      auto grad = random_host(t, s, 12);
      REQUIRE(bias_add_grad_cuda(gpu(), on_gpu(grad), &out, "bias_add_grad").ok());
      std::vector<int64_t> axes;
      for (int64_t a = 0; a + 1 < s.rank(); ++a)
        axes.push_back(a);
      auto want = eval1(cast(sum(cast(constant(g, grad), dtype::f64), axes), t));
      check_matches(back(out), want, tolerance(t) * 4, 1e-2);
    }
    for (int64_t cols : {10, 1000, 5000}) { // fewer and more columns than a block's threads
      auto logits = random_host(t, {64, cols}, 11, -8, 8);
      REQUIRE(softmax_cuda(gpu(), on_gpu(logits), &out, "softmax").ok());
      check_matches(back(out), eval1(softmax(constant(g, logits))), tolerance(t) * 4, 1e-4);
      std::vector<int32_t> l(64);
      for (size_t i = 0; i < l.size(); ++i)
        l[i] = int32_t((i * 7) % size_t(cols));
      auto labels = tensor::vector<int32_t>(l);
      tensor loss, backprop;
      REQUIRE(
          sparse_softmax_xent_cuda(gpu(), on_gpu(logits), on_gpu(labels), &loss, &backprop, "xent")
              .ok());
      auto [wl, wb] =
          sparse_softmax_cross_entropy_with_logits(constant(g, logits), constant(g, labels));
      auto r = eval({wl, wb});
      check_matches(back(loss), r[0], tolerance(t) * 4, 1e-3);
      check_matches(back(backprop), r[1], tolerance(t) * 4, 1e-4);
    }
  }
  // An out-of-range label: NaN loss on the GPU (the CPU kernel refuses it).
  tensor loss, backprop;
  REQUIRE(sparse_softmax_xent_cuda(gpu(), on_gpu(random_host(dtype::f32, {2, 3}, 12)),
                                   on_gpu(tensor::vector<int32_t>({0, 7})), &loss, &backprop, "x")
              .ok());
  auto l = back(loss);
  CHECK_FALSE(std::isnan(l.data<float>()[0]));
  CHECK(std::isnan(l.data<float>()[1]));
}

TEST_CASE("a runtime on a real GPU trains like the CPU", "[.gpu]") {
  auto train = [](runtime& rt) {
    graph g;
    g.set_seed(4);
    auto x = constant(g, random_host(dtype::f32, {64, 20}, 13));
    auto labels = constant(g, tensor::vector<int32_t>(std::vector<int32_t>(64, 3)));
    auto w = variable(g, truncated_normal(g, {20, 5}, 0.3), "gpu_real_w");
    auto b = variable(g, zeros(g, dtype::f32, {5}), "gpu_real_b");
    auto logits = bias_add(matmul(tanh(x), w.value), b.value);
    auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, labels).first);
    gradient_descent_optimizer sgd(0.5);
    auto step = sgd.minimize(loss);
    session s(rt, g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    std::vector<float> losses;
    for (int i = 0; i < 20; ++i)
      losses.push_back(s.run({}, {loss}, {step}).value()[0].data<float>()[0]);
    return losses;
  };
  runtime cpu_rt({.visible_gpus = std::vector<int>{}});
  runtime gpu_rt;
  REQUIRE_FALSE(gpu_rt.gpus().empty());
  auto a = train(cpu_rt), b = train(gpu_rt);
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(b[i] == Approx(a[i]).epsilon(1e-4));
  CHECK(gpu_rt.gpu_memory(0).value().num_allocs > 0);
}

TEST_CASE("GPU reductions match the CPU over any axes", "[.gpu]") {
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16}) {
    auto x = random_host(t, {6, 7, 8, 9}, 16);
    for (auto axes :
         std::vector<std::vector<int32_t>>{{0}, {3}, {1, 2}, {0, 2}, {-1, 0}, {0, 1, 2, 3}})
      for (bool keep : {false, true}) {
        INFO(name(t) << " axes " << axes.size() << " keep " << keep);
        auto ax = tensor::vector<int32_t>(axes);
        graph g;
        auto wide = cast(constant(g, x), dtype::f64);
        std::vector<int64_t> a64(axes.begin(), axes.end());
        std::vector<std::pair<gpu_reduce, output>> cases{
            {gpu_reduce::sum, sum(wide, a64, keep)},
            {gpu_reduce::mean, mean(wide, a64, keep)},
            {gpu_reduce::max, reduce_max(wide, a64, keep)},
            {gpu_reduce::min, reduce_min(wide, a64, keep)}};
        for (auto& [kind, cpu] : cases) {
          tensor out;
          REQUIRE(reduce_cuda(gpu(), kind, on_gpu(x), ax, keep, &out, "reduce").ok());
          check_matches(back(out), eval1(cpu), tolerance(t) * 8, 1e-3);
        }
      }
  }
}
