// Embeddings and sparse gradients: a lookup's gradient is indexed slices, sparse updates match
// their dense forms, partitioned tables look up and train like one table, scatter ops, clipping,
// and bad ids named.
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

tensor table_values(int64_t rows, int64_t cols, double scale = 1.0) {
  tensor t(dtype::f32, shape{rows, cols});
  auto v = t.flat<float>();
  for (int64_t i = 0; i < rows * cols; ++i)
    v[size_t(i)] = float(scale * double((i * 7) % 11 - 5) / 10.0);
  return t;
}

/// Trains `table` with `opt` on two batches of ids in turn, through a lookup (sparse gradient)
/// or through one_hot · table (dense gradient), and returns the table after `steps` steps.
tensor train_table(optimizer& opt, bool sparse, int steps, const std::vector<tensor>& batches,
                   const char* name, bool* sparse_update = nullptr) {
  graph g;
  auto table = variable(g, constant(g, table_values(6, 3)), name);
  auto ids = placeholder(g, dtype::i32, shape{-1}, "ids");
  auto rows = sparse ? embedding_lookup(table.value, ids)
                     : matmul(one_hot(ids, 6, 1.0, 0.0, dtype::f32), table.value);
  auto target = constant(g, table_values(1, 3, 2.0));
  auto loss = sum(square(rows - target));
  auto train = opt.minimize(loss, {table.ref});
  if (sparse_update) {
    *sparse_update = false;
    for (int v = 0; v < g.num_nodes(); ++v)
      *sparse_update |= g.at(v).op.starts_with("SparseApply");
  }
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  for (int i = 0; i < steps; ++i) {
    auto st = s.run({{ids, batches[size_t(i) % batches.size()]}}, {}, {train});
    INFO((st.ok() ? std::string() : st.error().to_string()));
    REQUIRE(st.ok());
  }
  return s.run({}, {table.value}).value()[0];
}

} // namespace

TEST_CASE("the gradient of an embedding lookup is indexed slices, duplicates kept") {
  graph g;
  auto table = variable(g, constant(g, table_values(5, 2)), "grad_table");
  auto ids = constant(g, {int32_t(1), int32_t(3), int32_t(1)});
  auto looked = embedding_lookup(table.value, ids);
  auto w = constant(g, {{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}});
  auto loss = sum(looked * w);
  auto gv = gradient_values({loss}, {table.ref});
  REQUIRE(gv[0].is_sparse());
  auto dense = gradients({loss}, {table.ref})[0];
  auto& sl = gv[0].slices();
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto r = s.run({}, {sl.values, sl.indices, sl.dense_shape, dense}).value();
  check_equal(r[0], vals<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  check_equal(r[1], vals<int32_t>({3}, {1, 3, 1}));
  check_equal(r[2], vals<int64_t>({2}, {5, 2}));
  // Dense: row 1 gets rows 0 and 2 of w summed.
  check_equal(r[3], vals<float>({5, 2}, {0, 0, 6, 8, 0, 0, 3, 4, 0, 0}));
}

TEST_CASE("lookups with 2-D ids give one slice row per id and keep the ids shape") {
  graph g;
  auto table = variable(g, constant(g, table_values(4, 3)), "grad_table_2d");
  auto ids = constant(g, tensor::from_values<int64_t>(shape{2, 2}, {0, 3, 3, 2}));
  auto looked = embedding_lookup(table.value, ids);
  CHECK(looked.shape() == shape({2, 2, 3}));
  auto gv = gradient_values({sum(looked)}, {table.ref});
  REQUIRE(gv[0].is_sparse());
  CHECK(gv[0].slices().values.shape() == shape({4, 3}));
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto r = s.run({}, {gv[0].to_dense()}).value();
  check_equal(r[0], vals<float>({4, 3}, {1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 2, 2}));
}

TEST_CASE("a variable read densely and through a lookup gets a dense gradient") {
  graph g;
  auto table = variable(g, constant(g, table_values(3, 2)), "mixed_table");
  auto looked = embedding_lookup(table.value, constant(g, {int32_t(2)}));
  auto loss = sum(looked) + sum(table.value);
  auto gv = gradient_values({loss}, {table.ref});
  REQUIRE_FALSE(gv[0].is_sparse());
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  check_equal(s.run({}, {gv[0].to_dense()}).value()[0],
              vals<float>({3, 2}, {1, 1, 1, 1, 2, 2}));
}

TEST_CASE("sparse optimizer updates match the dense ones on the rows looked up") {
  // The same ids every step: rows never looked up have zero slots, so the dense update leaves
  // them unchanged too, and the tables must agree everywhere.
  std::vector<tensor> batches{tensor::vector<int32_t>({1, 4, 1, 0})};
  auto check = [&](auto make, const char* which) {
    INFO(which);
    auto a = make();
    auto b = make();
    bool sparse_op = false, dense_sparse_op = true;
    tensor sparse =
        train_table(a, true, 4, batches, (std::string(which) + "_sparse").c_str(), &sparse_op);
    tensor dense = train_table(b, false, 4, batches, (std::string(which) + "_dense").c_str(),
                               &dense_sparse_op);
    CHECK(sparse_op);
    CHECK_FALSE(dense_sparse_op);
    check_close(sparse, dense, 1e-5, 1e-6);
    // Rows 2, 3 and 5 were never looked up.
    auto initial = table_values(6, 3);
    for (int64_t r : {2, 3, 5})
      for (int64_t c = 0; c < 3; ++c)
        CHECK(sparse.flat<float>()[size_t(r * 3 + c)] == initial.flat<float>()[size_t(r * 3 + c)]);
  };
  check([] { return gradient_descent_optimizer(0.1); }, "sgd");
  check([] { return momentum_optimizer(0.1, 0.9); }, "momentum");
  check([] { return momentum_optimizer(0.1, 0.9, true); }, "nesterov");
  check([] { return adagrad_optimizer(0.3); }, "adagrad");
  check([] { return rmsprop_optimizer(0.05, 0.9, 0.5); }, "rmsprop");
  check([] { return lazy_adam_optimizer(0.05); }, "lazy_adam");
}

TEST_CASE("lazy Adam leaves rows not looked up alone, while Adam moves every row") {
  std::vector<tensor> batches{tensor::vector<int32_t>({2}), tensor::vector<int32_t>({4})};
  lazy_adam_optimizer lazy(0.1);
  adam_optimizer adam(0.1);
  tensor one_step = train_table(lazy, true, 1, batches, "lazy_one");
  tensor lazy2 = train_table(lazy, true, 2, batches, "lazy_two");
  tensor adam2 = train_table(adam, true, 2, batches, "adam_two");
  adam_optimizer adam_dense(0.1);
  tensor dense2 = train_table(adam_dense, false, 2, batches, "adam_dense_two");
  auto row = [](const tensor& t, int r) {
    return std::vector<float>(t.flat<float>().begin() + r * 3, t.flat<float>().begin() + r * 3 + 3);
  };
  CHECK(row(lazy2, 2) == row(one_step, 2)); // step 2 did not look up row 2
  CHECK(row(adam2, 2) != row(one_step, 2)); // Adam's momentum moved it again
  check_close(adam2, dense2, 1e-5, 1e-6);   // Adam with a sparse gradient is Adam
}

TEST_CASE("embedding_lookup over parts: mod and div strategies") {
  graph g;
  // A 7×2 table in 3 parts of 3, 2 and 2 rows (fixed_size_partitioner's split).
  int64_t next = 0;
  auto parts = partitioned_variable(
      g, "parted", shape{7, 2},
      [&](const shape& s) {
        tensor t(dtype::f32, s);
        for (auto& v : t.flat<float>())
          v = float(next++);
        return constant(g, t);
      },
      fixed_size_partitioner(3));
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].name() == "parted/part_0");
  CHECK(parts[0].ref.shape() == shape({3, 2}));
  CHECK(parts[2].ref.shape() == shape({2, 2}));
  auto ids = constant(g, tensor::from_values<int64_t>(shape{2, 3}, {0, 6, 3, 5, 5, 1}));
  auto by_div = embedding_lookup(parts, ids, {.strategy = partition_strategy::div});
  auto by_mod = embedding_lookup(parts, ids, {.strategy = partition_strategy::mod});
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  auto r = s.run({}, {by_div, by_mod}).value();
  // div: id i is row i of the 7-row table (values 2i, 2i+1).
  check_equal(r[0], vals<float>({2, 3, 2}, {0, 1, 12, 13, 6, 7, 10, 11, 10, 11, 2, 3}));
  // mod: id i is row i / 3 of part i % 3 (part p starts at value 6, 10 for p = 1, 2).
  // 0 -> p0 r0 (0,1); 6 -> p0 r2 (4,5); 3 -> p0 r1 (2,3); 5 -> p2 r1 (12,13); 1 -> p1 r0 (6,7)
  check_equal(r[1], vals<float>({2, 3, 2}, {0, 1, 4, 5, 2, 3, 12, 13, 12, 13, 6, 7}));
}

TEST_CASE("a table in parts trains like the same table in one piece") {
  auto train = [](bool parted) {
    graph g;
    auto ids = placeholder(g, dtype::i32, shape{-1}, "ids");
    auto init = [&](const shape& s) { return filled(g, dtype::f32, s, 0.5); };
    std::vector<graph_variable> parts =
        parted ? partitioned_variable(g, "t", shape{5, 2}, init, fixed_size_partitioner(2))
               : std::vector<graph_variable>{variable(g, init(shape{5, 2}), "t")};
    auto looked = embedding_lookup(parts, ids, {.strategy = partition_strategy::div});
    auto loss = sum(square(looked - 1.0)) * constant(g, tensor::vector<float>({1.0f, 3.0f}));
    auto step = adagrad_optimizer(0.2).minimize(sum(loss));
    session s(test_runtime(), g);
    REQUIRE(s.run({global_variables_initializer(g)}).ok());
    for (auto batch : {std::vector<int32_t>{0, 4, 4}, {2, 3}, {4, 1, 0}})
      REQUIRE(s.run({{ids, tensor::vector<int32_t>(batch)}}, {}, {step}).ok());
    std::vector<output> values;
    for (auto& p : parts)
      values.push_back(p.value);
    return s.run({}, {concat(values, 0)}).value()[0];
  };
  check_close(train(true), train(false), 1e-6, 1e-7);
}

TEST_CASE("ids outside the table fail with the lookup and the id named") {
  graph g;
  auto table = variable(g, constant(g, table_values(4, 2)), "bad_ids_table");
  auto ids = placeholder(g, dtype::i32, shape{-1}, "ids");
  auto one = embedding_lookup(table.value, ids, {.name = "word_vectors"});
  auto parts = partitioned_variable(
      g, "bad_ids_parts", shape{4, 2}, [&](const shape& s) { return zeros(g, dtype::f32, s); },
      fixed_size_partitioner(2));
  auto parted = embedding_lookup(parts, ids, {.name = "parted_vectors"});
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  for (auto bad : {4, -1}) {
    feed_list feeds{{ids, tensor::vector<int32_t>({1, bad})}};
    auto e1 = s.run(feeds, {one});
    REQUIRE_FALSE(e1.ok());
    CHECK(e1.error().code() == error_code::invalid_argument);
    CHECK_THAT(e1.error().message(), Catch::Contains("word_vectors") &&
                                         Catch::Contains(std::to_string(bad)));
    auto e2 = s.run(feeds, {parted});
    REQUIRE_FALSE(e2.ok());
    CHECK(e2.error().code() == error_code::invalid_argument);
    CHECK_THAT(e2.error().message(), Catch::Contains("parted_vectors") &&
                                         Catch::Contains("id " + std::to_string(bad)));
  }
}

TEST_CASE("scatter_add, scatter_sub and scatter_update change only the rows named") {
  graph g;
  auto v = variable(g, zeros(g, dtype::f32, shape{4, 2}), "scattered");
  auto idx = constant(g, {int32_t(2), int32_t(0), int32_t(2)});
  auto up = constant(g, {{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}});
  auto add_op = scatter_add(v, idx, up);
  auto sub_op = scatter_sub(v, constant(g, {int64_t(0)}), constant(g, {{1.0f, 1.0f}}));
  auto set_op = scatter_update(v, constant(g, {int32_t(3)}), constant(g, {{9.0f, 8.0f}}));
  auto bad = scatter_add(v, constant(g, {int32_t(4)}), constant(g, {{1.0f, 1.0f}}));
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  REQUIRE(s.run({add_op, sub_op, set_op}).ok());
  check_equal(s.run({}, {v.value}).value()[0], vals<float>({4, 2}, {2, 3, 0, 0, 6, 8, 9, 8}));
  auto e = s.run({bad});
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.message(), Catch::Contains("indices[0] = 4") && Catch::Contains("scattered"));
  // Nothing changed.
  check_equal(s.run({}, {v.value}).value()[0], vals<float>({4, 2}, {2, 3, 0, 0, 6, 8, 9, 8}));
}

TEST_CASE("clip_by_global_norm scales dense and sparse gradients alike") {
  graph g;
  auto dense = gradient_value(constant(g, {3.0f, 0.0f}));
  auto sparse = gradient_value(indexed_slices{constant(g, {{4.0f, 0.0f}}), constant(g, {int32_t(1)}),
                                              constant(g, {int64_t(3), int64_t(2)})});
  auto [clipped, norm] = clip_by_global_norm({dense, sparse}, 1.0);
  auto [kept, norm2] = clip_by_global_norm({dense, sparse}, 10.0);
  REQUIRE(clipped[1].is_sparse());
  auto r = eval({norm, clipped[0].values(), clipped[1].values(), clipped[1].to_dense(),
                 kept[0].values()});
  check_close(r[0], tensor::scalar<float>(5.0f));
  check_close(r[1], tensor::vector<float>({0.6f, 0.0f}));
  check_close(r[2], vals<float>({1, 2}, {0.8f, 0.0f}));
  check_close(r[3], vals<float>({3, 2}, {0, 0, 0.8f, 0, 0, 0}));
  check_close(r[4], tensor::vector<float>({3.0f, 0.0f}));
}

TEST_CASE("dynamic_partition and dynamic_stitch round-trip, with gradients") {
  graph g;
  auto data = placeholder(g, dtype::f64, shape{5, 2}, "data");
  auto parts = constant(g, {int32_t(1), int32_t(0), int32_t(1), int32_t(1), int32_t(0)});
  auto pieces = dynamic_partition(data, parts, 2);
  auto pos = dynamic_partition(range(g, constant(g, int32_t(0)), constant(g, int32_t(5)),
                                     constant(g, int32_t(1))),
                               parts, 2);
  auto back = dynamic_stitch(pos, {pieces[0] * 2.0, pieces[1] * 3.0});
  auto grad = gradients({sum(back)}, {data})[0];
  auto x = tensor::from_values<double>(shape{5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto r = eval({pieces[0], back, grad}, {{data, x}});
  check_equal(r[0], vals<double>({2, 2}, {2, 3, 8, 9}));
  check_equal(r[1], vals<double>({5, 2}, {0, 3, 4, 6, 12, 15, 18, 21, 16, 18}));
  check_equal(r[2], vals<double>({5, 2}, {3, 3, 2, 2, 3, 3, 3, 3, 2, 2}));
}

TEST_CASE("a sparse update of a large table does not copy it") {
  graph g;
  const int64_t rows = 1 << 18, cols = 16; // 16 MiB
  auto table = variable(g, zeros(g, dtype::f32, shape{rows, cols}), "big_table");
  auto ids = placeholder(g, dtype::i32, shape{-1}, "ids");
  auto loss = sum(embedding_lookup(table.value, ids));
  auto step = gradient_descent_optimizer(0.5).minimize(loss);
  session s(test_runtime(), g);
  REQUIRE(s.run({global_variables_initializer(g)}).ok());
  feed_list feeds{{ids, tensor::vector<int32_t>({7, 99, 7})}};
  REQUIRE(s.run(feeds, {}, {step}).ok()); // warm up
  reset_tensor_memory_peak();
  auto before = tensor_memory_statistics();
  REQUIRE(s.run(feeds, {}, {step}).ok());
  auto after = tensor_memory_statistics();
  CHECK(after.peak_bytes - before.live_bytes < rows * cols * 4 / 4);
  auto v = s.run({}, {table.value}).value()[0];
  CHECK(v.flat<float>()[size_t(7 * cols)] == -2.0f); // twice per step, two steps, lr 0.5
  CHECK(v.flat<float>()[size_t(99 * cols)] == -1.0f);
  CHECK(v.flat<float>()[size_t(8 * cols)] == 0.0f);
}
