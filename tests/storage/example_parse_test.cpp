#include "runnel/storage/example.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/testdata.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

std::string example(std::initializer_list<std::pair<const std::string, feature>> f) {
  return encode_example(feature_map(f));
}
feature floats(std::vector<float> v) {
  return {.kind = feature_kind::floats, .floats = std::move(v)};
}
feature ints(std::vector<int64_t> v) {
  return {.kind = feature_kind::int64s, .int64s = std::move(v)};
}
feature strs(std::vector<std::string> v) {
  return {.kind = feature_kind::bytes, .bytes = std::move(v)};
}

} // namespace

TEST_CASE("example_parser: fixed, padded and sparse features of one record", "[parse]") {
  example_parser p({{.key = "x", .type = dtype::f32, .shape = {2, 2}},
                    {.key = "label", .type = dtype::i64, .shape = {}},
                    {.key = "tags", .type = dtype::string, .layout = feature_layout::padded},
                    {.key = "ids", .type = dtype::i64, .layout = feature_layout::sparse},
                    {.key = "w", .type = dtype::f32, .shape = {1},
                     .default_value = tensor::vector<float>({0.5f})}});
  auto rec = example({{"x", floats({1, 2, 3, 4})},
                      {"label", ints({7})},
                      {"tags", strs({"a", "bc"})},
                      {"ids", ints({4, 5, 6})},
                      {"unused", floats({9})}});
  std::vector<tensor> out;
  REQUIRE(p.parse_single(rec, out).ok());
  REQUIRE(out.size() == 1 + 1 + 2 + 3 + 1);
  check_equal(out[0], vals<float>({2, 2}, {1, 2, 3, 4}));
  check_equal(out[1], tensor::scalar<int64_t>(7));
  check_equal(out[2], tensor::vector<std::string>({"a", "bc"}));
  check_equal(out[3], tensor::scalar<int64_t>(2));
  check_equal(out[4], vals<int64_t>({3, 1}, {0, 1, 2}));
  check_equal(out[5], tensor::vector<int64_t>({4, 5, 6}));
  check_equal(out[6], tensor::vector<int64_t>({3}));
  check_equal(out[7], tensor::vector<float>({0.5f})); // the default
  CHECK(p.output_types() == std::vector<dtype>{dtype::f32, dtype::i64, dtype::string, dtype::i64,
                                               dtype::i64, dtype::i64, dtype::i64, dtype::f32});
}

TEST_CASE("example_parser: a batch pads varlen features and builds sparse indices", "[parse]") {
  example_parser p({{.key = "label", .type = dtype::i64, .shape = {}},
                    {.key = "seq", .type = dtype::f32, .layout = feature_layout::padded},
                    {.key = "ids", .type = dtype::i64, .layout = feature_layout::sparse}});
  std::vector<std::string> recs{
      example({{"label", ints({1})}, {"seq", floats({1})}, {"ids", ints({10, 11})}}),
      example({{"label", ints({2})}, {"seq", floats({1, 2, 3})}, {"ids", ints({})}}),
      example({{"label", ints({3})}, {"ids", ints({12})}})};
  std::vector<tensor> out;
  REQUIRE(p.parse_batch(recs, out).ok());
  check_equal(out[0], tensor::vector<int64_t>({1, 2, 3}));
  check_equal(out[1], vals<float>({3, 3}, {1, 0, 0, 1, 2, 3, 0, 0, 0}));
  check_equal(out[2], tensor::vector<int64_t>({1, 3, 0}));
  check_equal(out[3], vals<int64_t>({3, 2}, {0, 0, 0, 1, 2, 0}));
  check_equal(out[4], tensor::vector<int64_t>({10, 11, 12}));
  check_equal(out[5], tensor::vector<int64_t>({3, 2}));
}

TEST_CASE("example_parser: errors name the feature and the record", "[parse]") {
  example_parser p({{.key = "x", .type = dtype::f32, .shape = {3}},
                    {.key = "label", .type = dtype::i64, .shape = {}}});
  std::vector<tensor> out;
  std::vector<std::string> recs{example({{"x", floats({1, 2, 3})}, {"label", ints({1})}}),
                                example({{"x", floats({1, 2, 3})}})};
  auto missing = p.parse_batch(recs, out);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.message(), Catch::Contains("record 1 of the batch"));
  CHECK_THAT(missing.message(), Catch::Contains("'label' is missing"));
  auto wrong_type =
      p.parse_single(example({{"x", floats({1, 2, 3})}, {"label", floats({1})}}), out, "rec 9");
  REQUIRE_FALSE(wrong_type.ok());
  CHECK_THAT(wrong_type.message(), Catch::Contains("rec 9: feature 'label' holds float values"));
  auto wrong_count = p.parse_single(example({{"x", floats({1, 2})}, {"label", ints({1})}}), out);
  REQUIRE_FALSE(wrong_count.ok());
  CHECK_THAT(wrong_count.message(), Catch::Contains("'x' has 2 values, expected 3"));
  auto garbage = p.parse_single(std::string("\x0a\xff\xff\x01", 4), out);
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.code() == error_code::data_loss);
  CHECK_THAT(garbage.message(), Catch::Contains("malformed Example at byte"));
  CHECK_FALSE(example_parser::create({{.key = "v", .type = dtype::f32, .shape = {-1}}}).ok());
  CHECK_FALSE(example_parser::create({{.key = "v", .type = dtype::i32, .shape = {}}}).ok());
}

TEST_CASE("unpacked lists parse like packed ones", "[parse]") {
  // float_list {value: 1.5 value: 2.5} written unpacked (wire type 5), int64 unpacked (type 0).
  auto put = [](std::string& s, std::initializer_list<int> bytes) {
    for (int b : bytes)
      s.push_back(char(b));
  };
  std::string floats_list;
  float a = 1.5f, b = 2.5f;
  put(floats_list, {0x0d});
  floats_list.append(reinterpret_cast<char*>(&a), 4);
  put(floats_list, {0x0d});
  floats_list.append(reinterpret_cast<char*>(&b), 4);
  std::string feat = "\x12" + std::string(1, char(floats_list.size())) + floats_list;
  std::string entry = "\x0a\x01v\x12" + std::string(1, char(feat.size())) + feat;
  std::string ints_list = "\x08\x05\x08\x06";
  std::string ifeat = "\x1a" + std::string(1, char(ints_list.size())) + ints_list;
  std::string ientry = "\x0a\x01i\x12" + std::string(1, char(ifeat.size())) + ifeat;
  std::string features = "\x0a" + std::string(1, char(entry.size())) + entry + "\x0a" +
                         std::string(1, char(ientry.size())) + ientry;
  std::string rec = "\x0a" + std::string(1, char(features.size())) + features;
  example_parser p({{.key = "v", .type = dtype::f32, .shape = {2}},
                    {.key = "i", .type = dtype::i64, .shape = {2}}});
  std::vector<tensor> out;
  REQUIRE(p.parse_single(rec, out).ok());
  check_equal(out[0], tensor::vector<float>({1.5f, 2.5f}));
  check_equal(out[1], tensor::vector<int64_t>({5, 6}));
}

TEST_CASE("ParseExample and ParseSingleExample ops in a graph", "[parse]") {
  graph g;
  auto serialized = placeholder(g, dtype::string, {-1}, "serialized");
  std::vector<feature_spec> specs{
      {.key = "x", .type = dtype::f32, .shape = {2}},
      {.key = "label", .type = dtype::i64, .shape = {}, .default_value = tensor::scalar<int64_t>(-1)}};
  auto parsed = parse_example(serialized, specs);
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[0].shape() == shape{-1, 2});
  auto one = parse_single_example(placeholder(g, dtype::string, {}, "one"), specs);
  CHECK(one[0].shape() == shape{2});
  auto recs = tensor::vector<std::string>({example({{"x", floats({1, 2})}, {"label", ints({4})}}),
                                           example({{"x", floats({3, 4})}})});
  auto r = eval({parsed[0], parsed[1]}, {{serialized, recs}});
  check_equal(r[0], vals<float>({2, 2}, {1, 2, 3, 4}));
  check_equal(r[1], tensor::vector<int64_t>({4, -1}));
  auto bad = tensor::vector<std::string>({example({{"x", floats({1})}})});
  auto err = eval_error(parsed[0], {{serialized, bad}});
  CHECK_THAT(err.message(), Catch::Contains("ParseExample"));
  CHECK_THAT(err.message(), Catch::Contains("'x' has 1 values, expected 2"));
}

TEST_CASE("DecodeRaw reinterprets bytes", "[parse]") {
  graph g;
  std::string raw(8, '\0');
  float v[2] = {1.5f, -2.f};
  std::memcpy(raw.data(), v, 8);
  auto bytes = constant(g, tensor::vector<std::string>({raw, raw}));
  auto out = decode_raw(bytes, dtype::f32);
  CHECK(out.shape() == shape{2, -1});
  check_equal(eval1(out), vals<float>({2, 2}, {1.5f, -2.f, 1.5f, -2.f}));
  auto uneven = decode_raw(constant(g, tensor::vector<std::string>({raw, "abc"})), dtype::u8);
  CHECK_THAT(eval_error(uneven).message(), Catch::Contains("element 1 has 3 bytes"));
}

TEST_CASE("parsing Examples written by TensorFlow (Chicago taxi, GZIP)", "[parse]") {
  auto r = record_reader::open(testdata("tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"))
               .value();
  std::vector<std::string> recs;
  std::string rec;
  while (r.next(rec).value() && recs.size() < 100)
    recs.push_back(rec);
  example_parser p({{.key = "trip_seconds", .type = dtype::i64, .layout = feature_layout::padded},
                    {.key = "fare", .type = dtype::f32, .layout = feature_layout::padded},
                    {.key = "payment_type", .type = dtype::string, .shape = {1}}});
  std::vector<tensor> out;
  REQUIRE(p.parse_batch(recs, out).ok());
  CHECK(out[0].shape()[0] == 100);
  CHECK(out[0].data<int64_t>()[0] == 60); // first record: trip_seconds 60, fare 3.25, Cash
  CHECK(out[2].data<float>()[0] == 3.25f);
  CHECK(out[4].data<std::string>()[0] == "Cash");
}

TEST_CASE("ParseSingleSequenceExample on TensorFlow Transform's test data", "[parse]") {
  auto r = record_reader::open(testdata("tfrecord/tft_sequence_example.tfrecord.gz")).value();
  std::string rec;
  REQUIRE(r.next(rec).value());
  auto decoded = decode_sequence_example(rec).value();
  REQUIRE(decoded.feature_lists.count("int_feature"));
  int64_t step_len = int64_t(decoded.feature_lists["int_feature"][0].size());
  std::vector<tensor> out;
  std::vector<feature_spec> context{{.key = "float_feature", .type = dtype::f32, .shape = {4}},
                                    {.key = "int_feature", .type = dtype::i64, .shape = {1}}};
  std::vector<feature_spec> sequence{{.key = "int_feature", .type = dtype::i64, .shape = {step_len}}};
  REQUIRE(parse_single_sequence_example(rec, context, sequence, out).ok());
  check_equal(out[0], tensor::vector<float>({1, 2, 3, 4}));
  CHECK(out[2].shape() == shape{2, step_len});
  check_equal(out[3], tensor::scalar<int64_t>(2));
  // The same through the op.
  graph g;
  auto s = placeholder(g, dtype::string, {}, "s");
  auto parsed = parse_single_sequence_example(s, context, sequence);
  auto got = eval({parsed[2], parsed[3]}, {{s, tensor::scalar<std::string>(rec)}});
  check_equal(got[0], out[2]);
}

namespace {

/// An Example with one feature `key` whose list (field `list_field`: 2 float, 3 int64) holds
/// `list` as written, byte for byte (lists under 128 bytes).
std::string raw_example(const std::string& key, int list_field, const std::string& list) {
  auto len = [](const std::string& s) { return std::string(1, char(s.size())); };
  std::string feat = std::string(1, char(list_field << 3 | 2)) + len(list) + list;
  std::string entry = "\x0a" + len(key) + key + "\x12" + len(feat) + feat;
  std::string features = "\x0a" + len(entry) + entry;
  return "\x0a" + len(features) + features;
}
std::string packed_floats(std::vector<float> v) {
  std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return "\x0a" + std::string(1, char(bytes.size())) + bytes;
}

} // namespace

TEST_CASE("a batch's fixed features parse alike however their lists are written", "[parse]") {
  // Record 0 is one packed list (copied straight into the batch); the others take the general
  // path: two packed pieces, unpacked values, and an unknown field beside the values.
  float a = 1.5f, b = -2.5f;
  std::string unpacked = "\x0d" + std::string(reinterpret_cast<char*>(&a), 4) + "\x0d" +
                         std::string(reinterpret_cast<char*>(&b), 4);
  std::vector<std::string> recs{raw_example("v", 2, packed_floats({1.5f, -2.5f})),
                                raw_example("v", 2, packed_floats({1.5f}) + packed_floats({-2.5f})),
                                raw_example("v", 2, unpacked),
                                raw_example("v", 2, packed_floats({1.5f, -2.5f}) + "\x10\x01")};
  example_parser p({{.key = "v", .type = dtype::f32, .shape = {2}}});
  std::vector<tensor> out;
  REQUIRE(p.parse_batch(recs, out).ok());
  check_equal(out[0], vals<float>({4, 2}, {1.5f, -2.5f, 1.5f, -2.5f, 1.5f, -2.5f, 1.5f, -2.5f}));

  // Packed int64s, negative ones included (ten-byte varints).
  example_parser ints_parser({{.key = "i", .type = dtype::i64, .shape = {2}}});
  std::vector<std::string> int_recs{example({{"i", ints({-1, 300})}}),
                                    example({{"i", ints({0, int64_t(1) << 40})}})};
  REQUIRE(ints_parser.parse_batch(int_recs, out).ok());
  check_equal(out[0], vals<int64_t>({2, 2}, {-1, 300, 0, int64_t(1) << 40}));

  // A packed list of the wrong length, either way, is still an error naming the feature and
  // the record, after a record that went straight in.
  std::vector<std::string> short_recs{raw_example("v", 2, packed_floats({1, 2})),
                                      raw_example("v", 2, packed_floats({1, 2, 3}))};
  auto too_long = p.parse_batch(short_recs, out);
  REQUIRE_FALSE(too_long.ok());
  CHECK_THAT(too_long.message(), Catch::Contains("record 1 of the batch"));
  CHECK_THAT(too_long.message(), Catch::Contains("'v' has 3 values, expected 2"));
  std::vector<std::string> int_short{example({{"i", ints({1, 2})}}), example({{"i", ints({1})}})};
  std::vector<std::string> more{raw_example("v", 2, packed_floats({1, 2}) + packed_floats({3}))};
  auto more_after = p.parse_batch(more, out);
  REQUIRE_FALSE(more_after.ok());
  CHECK_THAT(more_after.message(), Catch::Contains("'v' has 3 values, expected 2"));
  auto too_short = ints_parser.parse_batch(int_short, out);
  REQUIRE_FALSE(too_short.ok());
  CHECK_THAT(too_short.message(), Catch::Contains("'i' has 1 values, expected 2"));
  // A packed list cut short inside its varints is malformed, not silently short.
  std::vector<std::string> cut{raw_example("i", 3, std::string("\x0a\x02\x01\x80", 4))};
  auto malformed = ints_parser.parse_batch(cut, out);
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.code() == error_code::data_loss);
}
