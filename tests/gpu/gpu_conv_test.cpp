// Convolutions and pooling on the GPU against the CPU kernels: Conv2D and its two backprops
// (cuDNN), MaxPool, AvgPool and their gradients (ours), for SAME (asymmetric included) and
// VALID padding. The CPU references run in float32 on the same (rounded) inputs; the gradients'
// reference is the CPU's gradient graph of sum(op(x) * dy).
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/tests/gpu/gpu_test_util.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

struct conv_case {
  shape input, filter;
  int64_t stride;
  std::string padding;
};

} // namespace

TEST_CASE("GPU Conv2D and its backprops match the CPU", "[.gpu][conv]") {
  std::vector<conv_case> cases{
      {{2, 28, 28, 3}, {3, 3, 3, 8}, 1, "SAME"},
      {{2, 28, 28, 3}, {3, 3, 3, 8}, 2, "SAME"}, // asymmetric: 0 rows before, 1 after
      {{2, 28, 28, 3}, {3, 3, 3, 8}, 1, "VALID"},
      {{2, 28, 28, 3}, {3, 3, 3, 8}, 2, "VALID"},
      {{3, 9, 7, 5}, {2, 4, 5, 6}, 1, "SAME"}, // even filters: asymmetric at stride 1
      {{1, 6, 6, 64}, {1, 1, 64, 32}, 1, "SAME"}};
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto& c : cases) {
      INFO(name(t) << " input " << c.input.to_string() << " filter " << c.filter.to_string()
                   << " stride " << c.stride << " " << c.padding);
      auto input = random_host(t, c.input, 14), filter = random_host(t, c.filter, 15);
      gpu_conv2d_options o{.stride_h = c.stride, .stride_w = c.stride, .padding = c.padding};
      tensor y;
      REQUIRE(conv2d_cuda(gpu(), on_gpu(input), on_gpu(filter), o, &y, "conv").ok());
      graph g;
      auto x32 = cast(constant(g, input), dtype::f32), f32 = cast(constant(g, filter), dtype::f32);
      auto conv = conv2d(x32, f32, {c.stride, c.stride}, c.padding);
      auto want_y = eval1(conv);
      double rtol = t == dtype::f32 ? 1e-4 : 3e-2;
      check_matches(back(y), want_y, rtol, 0.05);
      // The gradients for a random upstream gradient dy.
      auto dy = random_host(t, want_y.shape(), 16);
      auto grads = gradients({conv}, {x32, f32}, {cast(constant(g, dy), dtype::f32)});
      auto want = eval(grads);
      tensor dx, df;
      REQUIRE(conv2d_backprop_input_cuda(gpu(), tensor::vector<int32_t>({int32_t(c.input[0]), int32_t(c.input[1]), int32_t(c.input[2]), int32_t(c.input[3])}),
                                         on_gpu(filter), on_gpu(dy), o, &dx, "dx")
                  .ok());
      REQUIRE(conv2d_backprop_filter_cuda(gpu(), on_gpu(input), tensor::vector<int64_t>(c.filter.dims()),
                                          on_gpu(dy), o, &df, "df")
                  .ok());
      CHECK(dx.shape() == c.input);
      CHECK(df.shape() == c.filter);
      check_matches(back(dx), want[0], rtol, 0.08);
      check_matches(back(df), want[1], rtol, t == dtype::f32 ? 0.01 : 0.5);
    }
  // Wrong sizes name the node and the shapes.
  tensor out;
  auto bad = conv2d_backprop_input_cuda(gpu(), tensor::vector<int32_t>({2, 28, 28, 3}),
                                        on_gpu(random_host(dtype::f32, {3, 3, 3, 8}, 1)),
                                        on_gpu(random_host(dtype::f32, {2, 14, 14, 8}, 2)),
                                        {.stride_h = 1, .stride_w = 1}, &out, "bad/dx");
  CHECK_THAT(bad.to_string(), Catch::Contains("bad/dx") && Catch::Contains("[2,14,14,8]"));
}

TEST_CASE("GPU pooling and its gradients match the CPU, asymmetric SAME padding included",
          "[.gpu][pool]") {
  struct pool_case {
    int64_t size, window, stride;
    std::string padding;
  };
  std::vector<pool_case> cases{{28, 2, 2, "SAME"}, {28, 2, 2, "VALID"}, {7, 2, 2, "SAME"},
                               {7, 3, 1, "SAME"},  {9, 3, 2, "VALID"},  {8, 3, 2, "SAME"}};
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto& c : cases) {
      INFO(name(t) << " size " << c.size << " window " << c.window << " stride " << c.stride << " "
                   << c.padding);
      auto input = random_host(t, {2, c.size, c.size, 5}, 17);
      gpu_pool_options o{.window_h = c.window, .window_w = c.window, .stride_h = c.stride,
                         .stride_w = c.stride, .padding = c.padding};
      graph g;
      auto x32 = cast(constant(g, input), dtype::f32);
      auto mp = max_pool(x32, {c.window, c.window}, {c.stride, c.stride}, c.padding);
      auto ap = avg_pool(x32, {c.window, c.window}, {c.stride, c.stride}, c.padding);
      auto want = eval({mp, ap});
      tensor y;
      REQUIRE(max_pool_cuda(gpu(), on_gpu(input), o, &y, "maxpool").ok());
      check_matches(back(y), want[0], 0, 0); // a max is exact
      REQUIRE(avg_pool_cuda(gpu(), on_gpu(input), o, &y, "avgpool").ok());
      check_matches(back(y), want[1], tolerance(t) * 2, 1e-5);
      auto dy = random_host(t, want[0].shape(), 18);
      auto dy32 = cast(constant(g, dy), dtype::f32);
      auto want_dmax = eval(gradients({mp}, {x32}, {dy32}));
      auto want_davg = eval(gradients({ap}, {x32}, {dy32}));
      tensor dx;
      REQUIRE(max_pool_grad_cuda(gpu(), on_gpu(input), on_gpu(dy), o, &dx, "maxpool_grad").ok());
      check_matches(back(dx), want_dmax[0], tolerance(t) * 2, 1e-5);
      REQUIRE(avg_pool_grad_cuda(gpu(), input.shape(), on_gpu(dy), o, &dx, "avgpool_grad").ok());
      check_matches(back(dx), want_davg[0], tolerance(t) * 4, 1e-4);
    }
  tensor out;
  auto bad = max_pool_grad_cuda(gpu(), on_gpu(random_host(dtype::f32, {1, 4, 4, 1}, 1)),
                                on_gpu(random_host(dtype::f32, {1, 3, 3, 1}, 2)), {}, &out, "mpg");
  CHECK_THAT(bad.to_string(), Catch::Contains("mpg") && Catch::Contains("[1,2,2,1]"));
}
