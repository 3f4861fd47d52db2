#include <catch2/catch.hpp>
#include <cmath>
#include <iterator>
#include <list>
#include <sstream>

#include "runnel/ops/core/tensor.hpp"

using namespace runnel;

TEST_CASE("dtype names, sizes and parsing", "[ops]") {
  CHECK(name(dtype::f32) == "float32");
  CHECK(name(dtype::boolean) == "bool");
  CHECK(size_of(dtype::f16) == 2);
  CHECK(size_of(dtype::i64) == 8);
  CHECK(parse_dtype("int32").value() == dtype::i32);
  CHECK(parse_dtype("float").value() == dtype::f32);
  auto bad = parse_dtype("complex1024");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == error_code::invalid_argument);
  CHECK(bad.error().message().find("complex1024") != std::string::npos);
  CHECK(is_floating(dtype::bf16));
  CHECK(is_integer(dtype::u8));
  CHECK_FALSE(is_numeric(dtype::string));
}

TEST_CASE("half and bfloat16 convert exactly where representable", "[ops]") {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 0.000061035156f, 1024.f})
    CHECK(float(half(f)) == f);
  CHECK(std::isinf(float(half(1e6f))));
  CHECK(std::isnan(float(half(NAN))));
  CHECK(float(half(5.9604645e-8f)) == 5.9604645e-8f); // smallest subnormal
  for (float f : {0.f, 1.f, -3.f, 256.f, 1.5f})
    CHECK(float(bfloat16(f)) == f);
  CHECK(float(bfloat16(1.00390625f)) == 1.f); // rounds to nearest even
  CHECK(std::isnan(float(bfloat16(NAN))));
}

TEST_CASE("shapes: unknown dims, merging, broadcasting", "[ops]") {
  shape s{2, 3};
  CHECK(s.to_string() == "[2,3]");
  CHECK(s.num_elements() == 6);
  CHECK(shape{}.to_string() == "[]");
  CHECK(shape{}.num_elements() == 1);
  shape p{-1, 3};
  CHECK(p.to_string() == "[?,3]");
  CHECK(p.num_elements() == -1);
  CHECK(p.is_compatible_with(s));
  CHECK_FALSE(shape({-1, 4}).is_compatible_with(s));
  CHECK(shape::unknown().to_string() == "<unknown>");
  CHECK(shape::unknown().is_compatible_with(s));
  CHECK(p.merge(s).value() == s);
  CHECK_FALSE(shape({2, 4}).merge(s).ok());
  CHECK(broadcast_shapes({2, 1, 3}, {4, 1}).value() == shape({2, 4, 3}));
  CHECK(broadcast_shapes({}, {5}).value() == shape({5}));
  auto bad = broadcast_shapes({2, 3}, {4});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("[2,3]") != std::string::npos);
}

TEST_CASE("shapes keep up to six dimensions in place and more on the heap", "[ops]") {
  dim_vector small{2, 3, 4};
  dim_vector big{1, 2, 3, 4, 5, 6, 7, 8}; // rank 8: beyond the inline capacity
  REQUIRE(big.size() > dim_vector::inline_capacity);
  CHECK(big.to_vector() == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(std::vector<int64_t>(small) == std::vector<int64_t>{2, 3, 4});

  dim_vector copy = big; // a copy owns its own heap block
  copy[0] = 9;
  CHECK(big[0] == 1);
  CHECK(copy.back() == 8);
  dim_vector moved = std::move(copy); // a move steals the block and leaves the source empty
  CHECK(moved[0] == 9);
  CHECK(copy.empty()); // NOLINT(bugprone-use-after-move): a moved-from vector is empty
  CHECK(copy == dim_vector{});

  dim_vector a = small;
  a = big; // inline to heap
  CHECK(a == big);
  a = small; // heap to inline: the block is freed (the sanitizer lane checks)
  CHECK(a == small);
  CHECK(a != big);
  a = std::move(moved); // inline to heap by move
  CHECK(a.size() == 8);
  CHECK(a.front() == 9);
  const dim_vector& same = a;
  a = same; // self-assignment keeps the dimensions
  CHECK(a.size() == 8);
  CHECK(dim_vector(3, -1) == dim_vector{-1, -1, -1});
  CHECK(dim_vector(8, 7) == dim_vector{7, 7, 7, 7, 7, 7, 7, 7}); // a fill past the inline store
  CHECK(dim_vector(size_t(0), 1).empty());
  std::vector<int64_t> v{4, 5, 6, 7, 8, 9, 10};
  CHECK(dim_vector(v.begin(), v.end()) == dim_vector(v));
  std::list<int> linked{1, 2, 3, 4, 5, 6, 7}; // walked twice, not contiguous, another type
  CHECK(dim_vector(linked.begin(), linked.end()) == dim_vector{1, 2, 3, 4, 5, 6, 7});
  std::istringstream text("3 1 4 1 5 9 2 6"); // walked once
  CHECK(dim_vector(std::istream_iterator<int64_t>(text), std::istream_iterator<int64_t>()) ==
        dim_vector{3, 1, 4, 1, 5, 9, 2, 6});

  // Shapes and tensors of rank 8 copy, compare and count like any other.
  shape s8(big.to_vector());
  CHECK(s8.rank() == 8);
  CHECK(s8.num_elements() == 40320);
  CHECK(s8.to_string() == "[1,2,3,4,5,6,7,8]");
  shape unknown8 = shape::unknown_dims(8);
  CHECK(unknown8.merge(s8).value() == s8);
  tensor t(dtype::f32, shape{1, 1, 1, 1, 1, 1, 2, 3});
  tensor t2 = t;
  tensor t3 = std::move(t2);
  CHECK(t3.shape() == t.shape());
  CHECK(t3.num_elements() == 6);
  t3 = tensor(dtype::f32, shape{2, 3});
  CHECK(t3.shape().rank() == 2);
}

TEST_CASE("broadcast strides step through the input, 0 where it repeats", "[ops]") {
  int64_t s[4];
  broadcast_strides({3, 1}, {2, 3, 4}, s); // [3,1] read as [1,3,1]
  CHECK(std::vector<int64_t>(s, s + 3) == std::vector<int64_t>{0, 1, 0});
  broadcast_strides({2, 1, 4}, {2, 3, 4}, s);
  CHECK(std::vector<int64_t>(s, s + 3) == std::vector<int64_t>{4, 0, 1});
  broadcast_strides({5}, {1, 5}, s); // a dimension of 1 in both moves nothing either way
  CHECK(s[1] == 1);
  broadcast_strides({}, {2, 3}, s);
  CHECK(std::vector<int64_t>(s, s + 2) == std::vector<int64_t>{0, 0});
}

TEST_CASE("tensors share aligned, ref-counted buffers", "[ops]") {
  tensor t(dtype::f32, shape{3, 4});
  CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
  CHECK(t.bytes() == 48);
  CHECK(t.is_unique());
  tensor u = t;
  CHECK(u.shares_buffer_with(t));
  CHECK_FALSE(t.is_unique());
  u = tensor();
  CHECK(t.is_unique());
  auto m = tensor::from_values<float>({2, 2}, {1, 2, 3, 4});
  auto row = m.slice(1, 2);
  CHECK(row.shape() == shape({1, 2}));
  CHECK(row.data<float>()[0] == 3);
  CHECK(row.shares_buffer_with(m));
  auto flat = m.reshaped({4}).value();
  CHECK(flat.shares_buffer_with(m));
  CHECK_FALSE(m.reshaped({3}).ok());
  auto c = m.copy();
  CHECK_FALSE(c.shares_buffer_with(m));
  CHECK(equal(c, m));
  CHECK_THROWS_AS(tensor(dtype::f32, shape{-1, 2}), runnel::error);
  CHECK_THROWS_AS((tensor::from_values<float>({2}, {1, 2, 3})), runnel::error);
}

TEST_CASE("string tensors construct and destroy their elements", "[ops]") {
  auto t = tensor::vector<std::string>({"a", "bb", std::string(100, 'x')});
  auto u = t.copy();
  t = tensor();
  CHECK(u.flat<std::string>()[2].size() == 100);
  CHECK(u.to_string() == "string[3] [\"a\", \"bb\", \"" + std::string(100, 'x') + "\"]");
}

TEST_CASE("tensors print readably and elide long dimensions", "[ops]") {
  auto m = tensor::from_values<float>({2, 2}, {1, 2, 3, 4.5f});
  CHECK(m.to_string() == "float32[2,2] [[1, 2], [3, 4.5]]");
  std::ostringstream os;
  os << tensor::scalar<bool>(true);
  CHECK(os.str() == "bool[] true");
  std::vector<int32_t> v(100);
  for (int i = 0; i < 100; ++i)
    v[size_t(i)] = i;
  CHECK(tensor::vector<int32_t>(v).to_string(6) == "int32[100] [0, 1, 2, ..., 97, 98, 99]");
  CHECK(tensor().to_string() == "<empty tensor>");
}

TEST_CASE("large buffers are recycled through the cache", "[ops]") {
  void* first;
  {
    tensor big(dtype::f32, shape{1 << 20});
    first = big.raw_data();
  }
  CHECK(buffer_cache_statistics().cached_bytes >= (size_t(4) << 20));
  tensor again(dtype::f32, shape{1 << 20});
  CHECK(again.raw_data() == first);
}

TEST_CASE("equal and all_close treat NaN and tolerance sensibly", "[ops]") {
  auto a = tensor::vector<float>({1.f, NAN, 3.f});
  auto b = tensor::vector<float>({1.f, NAN, 3.000001f});
  CHECK_FALSE(equal(a, b));
  CHECK(all_close(a, b));
  CHECK_FALSE(all_close(a, tensor::vector<double>({1, 2, 3})));
}

TEST_CASE("status and result carry codes and messages", "[ops]") {
  status s = invalid_argument("bad shape [2,3]");
  CHECK(s.to_string() == "INVALID_ARGUMENT: bad shape [2,3]");
  CHECK(s.with_context("node 'x'").message() == "node 'x': bad shape [2,3]");
  result<int> r = s;
  CHECK_FALSE(r.ok());
  CHECK_THROWS_WITH(r.value(), "INVALID_ARGUMENT: bad shape [2,3]");
  result<int> ok = 3;
  CHECK(ok.value() == 3);
  CHECK(ok.error().ok());
}
