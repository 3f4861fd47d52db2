#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "runnel/storage/example.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/tests/testdata.hpp"

using namespace runnel;
using runnel::testing::testdata;
namespace fs = std::filesystem;

namespace {

std::string first_record(const std::string& path) {
  auto r = record_reader::open(path).value();
  std::string rec;
  REQUIRE(r.next(rec).value());
  return rec;
}

} // namespace

/// Every feature name in a file, with its kind (records may carry different subsets).
std::map<std::string, feature_kind> feature_kinds(const std::string& path, int64_t& records) {
  auto r = record_reader::open(path).value();
  std::string rec;
  std::map<std::string, feature_kind> kinds;
  records = 0;
  while (r.next(rec).value()) {
    ++records;
    auto f = decode_example(rec);
    REQUIRE(f.ok());
    for (auto& [name, feat] : *f)
      kinds[name] = feat.kind;
    CHECK(decode_example(encode_example(*f)).value() == *f); // re-encoding round-trips
  }
  return kinds;
}

TEST_CASE("Examples written by TensorFlow decode: floats, int64s and bytes", "[storage]") {
  int64_t n = 0;
  auto spotify =
      feature_kinds(testdata("tfrecord/spotify_featran/train/part-00000-of-00005.tfrecords"), n);
  CHECK(n == 158);
  for (auto name : {"f1", "f2_EVEN", "f2_ODD", "f3", "label"}) {
    INFO(name);
    REQUIRE(spotify.count(name));
    CHECK(spotify.at(name) == feature_kind::floats);
  }
  auto taxi = feature_kinds(testdata("tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"), n);
  CHECK(n == 3750);
  CHECK(taxi.size() == 18);
  CHECK(taxi.at("trip_seconds") == feature_kind::int64s);
  CHECK(taxi.at("fare") == feature_kind::floats);
  CHECK(taxi.at("company") == feature_kind::bytes);
}

TEST_CASE("SequenceExamples written by TensorFlow decode", "[storage]") {
  auto s =
      decode_sequence_example(first_record(testdata("tfrecord/tft_sequence_example.tfrecord.gz")))
          .value();
  REQUIRE(s.context.count("float_feature"));
  CHECK(s.context.at("float_feature").floats.size() == 4);
  CHECK(s.context.at("int_feature").int64s.size() == 1);
  REQUIRE(s.feature_lists.count("int_feature"));
  CHECK(s.feature_lists.at("int_feature").size() == 2);
  CHECK(s.feature_lists.at("string_feature").size() == 2);
  CHECK(s.feature_lists.at("string_feature")[0].kind == feature_kind::bytes);
  auto again = decode_sequence_example(encode_sequence_example(s)).value();
  CHECK(again.context == s.context);
  CHECK(again.feature_lists == s.feature_lists);
}

TEST_CASE("unpacked lists and unknown fields decode, and malformed bytes name an offset",
          "[storage]") {
  // Example{features{feature{"x": Feature{float_list{value: 1.5 (unpacked), value: 2}}}}},
  // plus an unknown varint field 7 at the top level.
  std::string floats = std::string("\x0d", 1) + std::string("\x00\x00\xc0\x3f", 4) +
                       std::string("\x0d", 1) + std::string("\x00\x00\x00\x40", 4);
  std::string feature = "\x12" + std::string(1, char(floats.size())) + floats;
  std::string entry =
      std::string("\x0a\x01x", 3) + "\x12" + std::string(1, char(feature.size())) + feature;
  std::string features = "\x0a" + std::string(1, char(entry.size())) + entry;
  std::string example = "\x0a" + std::string(1, char(features.size())) + features + "\x38\x05";
  auto f = decode_example(example).value();
  CHECK(f.at("x").floats == std::vector<float>{1.5f, 2.f});
  // Unpacked int64s.
  feature_map ints{{"n", {feature_kind::int64s, {}, {}, {-1, 300}}}};
  CHECK(decode_example(encode_example(ints)).value() == ints);

  auto bad = decode_example(example.substr(0, example.size() - 6));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == error_code::data_loss);
  CHECK(bad.error().message().find("malformed protobuf at byte") != std::string::npos);
}

TEST_CASE("features print as JSON, with base64 for binary bytes", "[storage]") {
  feature_map f{{"label", {feature_kind::int64s, {}, {}, {3}}},
                {"name", {feature_kind::bytes, {"cat"}, {}, {}}},
                {"raw", {feature_kind::bytes, {std::string("\x00\xff", 2)}, {}, {}}},
                {"x", {feature_kind::floats, {}, {0.5f, 2.f}, {}}}};
  CHECK(features_to_json(f) ==
        "{\"label\":{\"type\":\"int64\",\"values\":[3]},\"name\":{\"type\":\"bytes\","
        "\"values\":[\"cat\"]},\"raw\":{\"type\":\"bytes\",\"encoding\":\"base64\","
        "\"values\":[\"AP8=\"]},\"x\":{\"type\":\"float\",\"values\":[0.5,2.0]}}");
}
