// float16 and bfloat16 kernels against float32 ones on random inputs. Both sides get the same
// inputs (rounded to 16 bits once), so the difference is the 16-bit kernel's own rounding:
// one rounding of the result for element-wise ops, float32 accumulation for MatMul.
#include <cmath>
#include <functional>
#include <random>

#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor random_tensor(shape s, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(size_t(s.num_elements()));
  for (auto& x : v)
    x = d(rng);
  return tensor::from_values<float>(std::move(s), std::move(v));
}

/// Relative tolerance of one rounding (plus accumulation slack) per 16-bit type.
double tolerance(dtype t) {
  return t == dtype::bf16 ? 1.6e-2 : 2e-3;
}

using builder_fn = std::function<output(const std::vector<output>&)>;

/// Runs `f` on float32 inputs rounded to `low`, and on the same inputs in `low`; compares.
void compare(dtype low, const std::vector<tensor>& inputs, const builder_fn& f, double atol = 1e-3) {
  graph g;
  std::vector<output> wide, narrow;
  for (auto& t : inputs) {
    auto c = constant(g, t);
    if (t.type() == dtype::f32) {
      auto rounded = cast(c, low);
      narrow.push_back(rounded);
      wide.push_back(cast(rounded, dtype::f32));
    } else {
      narrow.push_back(c);
      wide.push_back(c);
    }
  }
  auto y_wide = f(wide);
  auto y_narrow = f(narrow);
  REQUIRE(y_narrow.type() == (y_wide.type() == dtype::f32 ? low : y_wide.type()));
  auto r = eval({y_wide, y_narrow.type() == low ? cast(y_narrow, dtype::f32) : y_narrow});
  if (r[0].type() == dtype::f32)
    check_close(r[1], r[0], tolerance(low), atol);
  else
    check_equal(r[1], r[0]);
}

} // namespace

TEST_CASE("16-bit conversions round to nearest even and keep specials", "[ops][precision]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bf16_bits(1.00390625f) == 0x3f80); // halfway, even stays
  CHECK(float_to_bf16_bits(1.01171875f) == 0x3f82); // halfway, odd rounds up
  CHECK(float_to_half_bits(1.0f + 0x1p-11f) == 0x3c00);     // halfway, even stays
  CHECK(float_to_half_bits(1.0f + 3 * 0x1p-11f) == 0x3c02); // halfway, odd rounds up
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  CHECK(std::isinf(half_bits_to_float(float_to_half_bits(70000.f)))); // beyond half's range
  CHECK(half_bits_to_float(float_to_half_bits(65504.f)) == 65504.f);
  CHECK(half_bits_to_float(float_to_half_bits(5.9604645e-8f)) == 5.9604645e-8f); // subnormal
  CHECK(half_bits_to_float(0x8001) == -5.9604645e-8f);
  // Every half decodes to its textbook value and encodes back to itself; bfloat16 likewise.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint32_t exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
    if (exp == 0x1f)
      continue; // infinities and NaN: checked above
    double v = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(1.0 + mant / 1024.0, int(exp) - 15);
    if (b & 0x8000)
      v = -v;
    REQUIRE(half_bits_to_float(uint16_t(b)) == float(v));
    REQUIRE(float_to_half_bits(float(v)) == uint16_t(b));
    float f = bf16_bits_to_float(uint16_t(b));
    if (!std::isnan(f))
      REQUIRE(float_to_bf16_bits(f) == uint16_t(b));
  }
}

TEST_CASE("16-bit element-wise ops match float32 within one rounding", "[ops][precision]") {
  for (dtype low : {dtype::f16, dtype::bf16}) {
    INFO(name(low));
    auto a = random_tensor({64, 33}, 1), b = random_tensor({64, 33}, 2), row = random_tensor({33}, 3);
    auto pos = random_tensor({64, 33}, 4, 0.1f, 3.f);
    compare(low, {a, b}, [](auto& x) { return x[0] + x[1]; });
    compare(low, {a, row}, [](auto& x) { return x[0] * x[1]; });   // broadcast
    compare(low, {a, pos}, [](auto& x) { return x[0] / x[1]; });
    compare(low, {a, b}, [](auto& x) { return maximum(x[0], x[1]); });
    compare(low, {a, b}, [](auto& x) { return greater(x[0], x[1]); }); // bool out
    compare(low, {a}, [](auto& x) { return relu(x[0]); });
    compare(low, {a}, [](auto& x) { return tanh(x[0]); });
    compare(low, {a}, [](auto& x) { return sigmoid(x[0]); });
    compare(low, {a}, [](auto& x) { return exp(x[0]); });
    compare(low, {a}, [](auto& x) { return square(x[0]); });
    compare(low, {a, row}, [](auto& x) { return bias_add(x[0], x[1]); });
    compare(low, {a}, [](auto& x) { return argmax(x[0], 1); }); // int64 out
  }
}

TEST_CASE("16-bit reductions and NN ops match float32", "[ops][precision]") {
  for (dtype low : {dtype::f16, dtype::bf16}) {
    INFO(name(low));
    auto a = random_tensor({32, 50}, 5);
    compare(low, {a}, [](auto& x) { return sum(x[0], {1}); }, 5e-2);
    compare(low, {a}, [](auto& x) { return mean(x[0], {0}); });
    compare(low, {a}, [](auto& x) { return reduce_max(x[0], {1}); });
    compare(low, {a}, [](auto& x) { return softmax(x[0]); });
    auto labels = tensor::from_values<int32_t>({32}, std::vector<int32_t>(32, 7));
    compare(low, {a, labels},
            [](auto& x) { return sparse_softmax_cross_entropy_with_logits(x[0], x[1]).first; });
    auto img = random_tensor({2, 9, 9, 3}, 6), filt = random_tensor({3, 3, 3, 4}, 7, -0.5f, 0.5f);
    compare(low, {img, filt}, [](auto& x) { return conv2d(x[0], x[1], {1, 1}, "SAME"); }, 2e-2);
    compare(low, {img}, [](auto& x) { return max_pool(x[0], {2, 2}, {2, 2}, "SAME"); });
  }
}

TEST_CASE("16-bit MatMul matches float32 for every transpose", "[ops][precision]") {
  for (dtype low : {dtype::f16, dtype::bf16}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(name(low) << " transpose_a=" << ta << " transpose_b=" << tb);
        auto a = random_tensor(ta ? shape{70, 37} : shape{37, 70}, 8);
        auto b = random_tensor(tb ? shape{29, 70} : shape{70, 29}, 9);
        compare(low, {a, b},
                [&](auto& x) { return matmul(x[0], x[1], {.transpose_a = ta, .transpose_b = tb}); },
                5e-2);
      }
  }
}

TEST_CASE("gradients flow through 16-bit compute to float32 weights", "[ops][precision]") {
  graph g;
  auto x = constant(g, random_tensor({8, 5}, 10));
  auto w = constant(g, random_tensor({5, 3}, 11));
  auto loss16 = sum(cast(relu(matmul(cast(x, dtype::bf16), cast(w, dtype::bf16))), dtype::f32));
  auto grad16 = gradients({loss16}, {w})[0];
  auto xr = cast(cast(x, dtype::bf16), dtype::f32), wr = cast(cast(w, dtype::bf16), dtype::f32);
  auto grad32 = gradients({sum(relu(matmul(xr, wr)))}, {w})[0];
  REQUIRE(grad16.type() == dtype::f32);
  auto r = eval({grad16, grad32});
  check_close(r[0], r[1], 2e-2, 2e-2);
}

TEST_CASE("a 16-bit op with no kernel is refused with the node named", "[ops][precision]") {
  graph g;
  auto x = cast(constant(g, random_tensor({4, 4}, 12)), dtype::bf16);
  // MatrixInverse is linear algebra: float32 and float64 only, refused while building.
  CHECK_THROWS_WITH(matrix_inverse(x),
                    Catch::Contains("bfloat16") && Catch::Contains("MatrixInverse"));
  // Mixing precisions is refused at graph build, naming the inputs' types.
  auto y = constant(g, random_tensor({4, 4}, 13));
  CHECK_THROWS_WITH(x + y, Catch::Contains("bfloat16") && Catch::Contains("float32"));
}

TEST_CASE("an MLP's gradients in bfloat16 and float16 match float32's", "[ops][precision]") {
  for (dtype low : {dtype::bf16, dtype::f16}) {
    INFO(name(low));
    graph g;
    auto x = constant(g, random_tensor({100, 784}, 14, 0.f, 1.f));
    auto w1 = constant(g, random_tensor({784, 512}, 15, -0.05f, 0.05f));
    auto b1 = constant(g, random_tensor({512}, 16, -0.05f, 0.05f));
    auto w2 = constant(g, random_tensor({512, 10}, 17, -0.05f, 0.05f));
    auto labels = constant(g, tensor::from_values<int32_t>({100}, std::vector<int32_t>(100, 3)));
    auto loss_of = [&](dtype t) {
      auto c = [&](output v) { return t == dtype::f32 ? v : cast(v, t); };
      auto h = relu(bias_add(matmul(c(x), c(w1)), c(b1)));
      auto logits = cast(matmul(h, c(w2)), dtype::f32);
      return mean(sparse_softmax_cross_entropy_with_logits(logits, labels).first);
    };
    auto g32 = gradients({loss_of(dtype::f32)}, {w1, b1, w2});
    auto g16 = gradients({loss_of(low)}, {w1, b1, w2});
    auto r = eval({g32[0], g32[1], g32[2], g16[0], g16[1], g16[2]});
    for (int i = 0; i < 3; ++i) {
      INFO("gradient " << i);
      check_close(r[size_t(3 + i)], r[size_t(i)], 0.1, 2e-3);
    }
  }
}

TEST_CASE("the Cast kernel's vectorised conversions agree with the portable ones", "[ops][precision]") {
  // Every finite half, and floats spread over float16's range (ties included).
  tensor halves(dtype::f16, shape{0x7c00 * 2});
  std::vector<float> floats;
  auto* hb = reinterpret_cast<uint16_t*>(halves.raw_data());
  for (uint32_t b = 0, i = 0; b < 0x10000; ++b)
    if (((b >> 10) & 0x1f) != 0x1f)
      hb[i++] = uint16_t(b);
  std::mt19937 rng(18);
  for (int i = 0; i < 100000; ++i)
    floats.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), i % 40 - 25));
  for (uint32_t b = 0; b < 0x7c00; b += 7) // exact ties between neighbouring halves
    floats.push_back((half_bits_to_float(uint16_t(b)) + half_bits_to_float(uint16_t(b + 1))) / 2);
  graph g;
  auto wide = cast(constant(g, halves), dtype::f32);
  auto x = tensor::from_values<float>({int64_t(floats.size())}, floats);
  auto narrow = cast(constant(g, x), dtype::f16);
  auto narrow_bf = cast(constant(g, x), dtype::bf16);
  auto r = eval({wide, narrow, narrow_bf});
  for (int64_t i = 0; i < halves.num_elements(); ++i)
    REQUIRE(r[0].data<float>()[i] == half_bits_to_float(hb[i]));
  auto* nb = reinterpret_cast<const uint16_t*>(r[1].raw_data());
  auto* bb = reinterpret_cast<const uint16_t*>(r[2].raw_data());
  for (size_t i = 0; i < floats.size(); ++i) {
    REQUIRE(nb[i] == float_to_half_bits(floats[i]));
    REQUIRE(bb[i] == float_to_bf16_bits(floats[i]));
  }
}
