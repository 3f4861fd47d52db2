#include <cmath>
#include <random>

#include "runnel/ops/grad/gradients.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

TEST_CASE("stack, unstack, split and squeeze", "[ops]") {
  graph g;
  auto a = constant(g, {1.f, 2.f});
  auto b = constant(g, {3.f, 4.f});
  auto m = constant(g, vals<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  auto parts = split(m, 2, 1);
  auto rows = unstack(m, 2, 0);
  auto r = eval({stack({a, b}), stack({a, b}, 1), parts[0], parts[1], rows[1],
                 squeeze(constant(g, vals<float>({1, 2, 1}, {5, 6}))),
                 squeeze(constant(g, vals<float>({1, 2, 1}, {5, 6})), {0})});
  check_equal(r[0], vals<float>({2, 2}, {1, 2, 3, 4}));
  check_equal(r[1], vals<float>({2, 2}, {1, 3, 2, 4}));
  check_equal(r[2], vals<float>({2, 2}, {1, 2, 5, 6}));
  check_equal(r[3], vals<float>({2, 2}, {3, 4, 7, 8}));
  check_equal(r[4], tensor::vector<float>({5, 6, 7, 8}));
  check_equal(r[5], tensor::vector<float>({5, 6}));
  check_equal(r[6], vals<float>({2, 1}, {5, 6}));
  CHECK_THROWS_AS(split(m, 3, 1), runnel::error);
  CHECK_THROWS_AS(squeeze(m, {0}), runnel::error);
}

TEST_CASE("tile, pad, reverse and range", "[ops]") {
  graph g;
  auto m = constant(g, vals<int32_t>({2, 2}, {1, 2, 3, 4}));
  auto r = eval({tile(m, {1, 2}), pad(m, {{1, 0}, {0, 1}}), reverse(m, {1}), reverse(m, {0, 1}),
                 range(g, constant(g, 1), constant(g, 8), constant(g, 3))});
  check_equal(r[0], vals<int32_t>({2, 4}, {1, 2, 1, 2, 3, 4, 3, 4}));
  check_equal(r[1], vals<int32_t>({3, 3}, {0, 0, 0, 1, 2, 0, 3, 4, 0}));
  check_equal(r[2], vals<int32_t>({2, 2}, {2, 1, 4, 3}));
  check_equal(r[3], vals<int32_t>({2, 2}, {4, 3, 2, 1}));
  check_equal(r[4], tensor::vector<int32_t>({1, 4, 7}));
  auto bad = eval_error(range(g, constant(g, 5), constant(g, 1), constant(g, 1), "backwards"));
  CHECK(bad.message().find("node 'backwards' (op Range): start 5") != std::string::npos);
}

TEST_CASE("ReverseSequence reverses each row's first seq_lengths elements", "[ops]") {
  graph g;
  // [time 3, batch 2, 2]: batch on dim 1, time on dim 0, lengths 2 and 3.
  auto x = constant(g, vals<int32_t>({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  auto rs = [&](output lengths, const char* name) {
    return g.build("ReverseSequence", name, {x.ep(), lengths.ep()},
                   {{"seq_dim", int64_t(0)}, {"batch_dim", int64_t(1)}})[0];
  };
  check_equal(eval1(rs(constant(g, tensor::vector<int64_t>({2, 3})), "rs")),
              vals<int32_t>({3, 2, 2}, {5, 6, 11, 12, 1, 2, 7, 8, 9, 10, 3, 4}));
  auto too_long = eval_error(rs(constant(g, tensor::vector<int64_t>({2, 4})), "too_long"));
  CHECK(too_long.message().find("seq_lengths[1] = 4 is outside [0, 3]") != std::string::npos);
  auto short_list = eval_error(rs(constant(g, tensor::vector<int64_t>({2})), "short_list"));
  CHECK(short_list.message().find("one length per batch element (2)") != std::string::npos);
}

TEST_CASE("random_shuffle permutes rows reproducibly", "[ops]") {
  graph g;
  g.set_seed(5);
  std::vector<int32_t> v(100);
  for (int i = 0; i < 100; ++i)
    v[size_t(i)] = i;
  auto s = random_shuffle(constant(g, tensor::vector<int32_t>(v)));
  auto r = eval1(s);
  auto sorted = r.copy();
  std::sort(sorted.data<int32_t>(), sorted.data<int32_t>() + 100);
  check_equal(sorted, tensor::vector<int32_t>(v));
  CHECK_FALSE(equal(r, tensor::vector<int32_t>(v)));
}

TEST_CASE("log_softmax, l2_loss and in_top_k", "[ops]") {
  graph g;
  auto x = constant(g, vals<float>({2, 3}, {1, 2, 3, 0, 0, 0}));
  auto r = eval({log_softmax(x), l2_loss(constant(g, {1.f, 2.f, 3.f})),
                 in_top_k(x, constant(g, {2, 1}), 1), in_top_k(x, constant(g, {0, 1}), 2)});
  float z = std::log(std::exp(1.f) + std::exp(2.f) + std::exp(3.f));
  check_close(r[0], vals<float>({2, 3}, {1 - z, 2 - z, 3 - z, -std::log(3.f), -std::log(3.f),
                                         -std::log(3.f)}));
  check_equal(r[1], tensor::scalar<float>(7));
  check_equal(r[2], tensor::vector<bool>({true, true})); // ties count as in the top k
  check_equal(r[3], tensor::vector<bool>({false, true}));
}

TEST_CASE("batch_matmul, matrix_inverse and matrix_determinant", "[ops]") {
  graph g;
  auto a = constant(g, vals<double>({2, 2, 2}, {1, 2, 3, 4, 2, 0, 0, 2}));
  auto b = constant(g, vals<double>({2, 2, 1}, {1, 1, 3, 4}));
  auto r = eval({batch_matmul(a, b), batch_matmul(a, a, true, false), matrix_inverse(a),
                 matrix_determinant(a)});
  check_equal(r[0], vals<double>({2, 2, 1}, {3, 7, 6, 8}));
  check_equal(r[1], vals<double>({2, 2, 2}, {10, 14, 14, 20, 4, 0, 0, 4}));
  check_close(r[2], vals<double>({2, 2, 2}, {-2, 1, 1.5, -0.5, 0.5, 0, 0, 0.5}));
  check_close(r[3], tensor::vector<double>({-2, 4}));
  auto singular =
      eval_error(matrix_inverse(constant(g, vals<double>({2, 2}, {1, 2, 2, 4})), false, "inv"));
  CHECK(singular.message() == "node 'inv' (op MatrixInverse): matrix 0 is not invertible");
}

TEST_CASE("strided_slice follows NumPy/TensorFlow indexing", "[ops]") {
  graph g;
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i)
    v[size_t(i)] = i;
  auto x = constant(g, vals<int32_t>({2, 3, 4}, v));
  std::vector<int32_t> ten(10);
  for (int i = 0; i < 10; ++i)
    ten[size_t(i)] = i;
  auto t = constant(g, tensor::vector<int32_t>(ten));
  auto r = eval({
      strided_slice(x, {0, 1, 0}, {0, 0, 0}, {1, 1, 2}, 0b101, 0b111),   // x[:, 1:, ::2]
      strided_slice(x, {1, 0}, {2, 0}, {1, -1}, 0b10, 0b10, 0, 0, 0b01), // x[1, ::-1]
      strided_slice(x, {0, 1}, {0, 2}, {1, 1}, 0, 0, 0b01, 0, 0b10),     // x[..., 1]
      strided_slice(x, {0, 0, -1}, {0, 0, 0}, {1, 1, 1}, 0b001, 0b001, 0, 0b010, 0b100),
      strided_slice(t, {-5}, {100}, {3}), // t[-5:100:3]
      strided_slice(t, {8}, {2}, {-2}),   // t[8:2:-2]
  });
  check_equal(r[0], vals<int32_t>({2, 2, 2}, {4, 6, 8, 10, 16, 18, 20, 22}));
  check_equal(r[1], vals<int32_t>({3, 4}, {20, 21, 22, 23, 16, 17, 18, 19, 12, 13, 14, 15}));
  check_equal(r[2], vals<int32_t>({2, 3}, {1, 5, 9, 13, 17, 21}));
  check_equal(r[3], vals<int32_t>({2, 1, 4}, {8, 9, 10, 11, 20, 21, 22, 23}));
  check_equal(r[4], tensor::vector<int32_t>({5, 8}));
  check_equal(r[5], tensor::vector<int32_t>({8, 6, 4}));
  CHECK(strided_slice(x, {0, 1, 0}, {0, 0, 0}, {1, 1, 2}, 0b101, 0b111).shape() ==
        shape({2, 2, 2}));
  CHECK_THROWS_AS(strided_slice(x, {0}, {1}, {0}), runnel::error);                // zero stride
  CHECK_THROWS_AS(strided_slice(x, {5}, {6}, {1}, 0, 0, 0, 0, 1), runnel::error); // index 5 of 2
}
