// Partitioned variables in TensorFlow V2 checkpoints: TensorFlow's OrderedCode against the
// encodings its own tests publish (ordered_code_test.cc's EncodingIsExpected), slice keys, and
// partitioned variables written by tests/tf/make_tf_checkpoint.py (its own encoders) read whole.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runnel/storage/tf/tensor_slice.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"

using namespace runnel;
using namespace runnel::tf;
namespace fs = std::filesystem;

TEST_CASE("OrderedCode writes TensorFlow's bytes and reads them back", "[tf][checkpoint]") {
  using namespace std::string_literals;
  std::vector<std::pair<int64_t, std::string>> signed_codes = {
      {0, "\x80"s},
      {1, "\x81"s},
      {63, "\xbf"s},
      {64, "\xc0@"s},
      {255, "\xc0\xff"s},
      {256, "\xc1\x00"s},
      {8191, "\xdf\xff"s},
      {8192, "\xe0 \x00"s},
      {1048575, "\xef\xff\xff"s},
      {1048576, "\xf0\x10\x00\x00"s},
      {134217728, "\xf8\x08\x00\x00\x00"s}};
  for (auto& [v, code] : signed_codes) {
    INFO(v);
    std::string out;
    ordered_write_signed(out, v);
    CHECK(out == code);
    std::string_view in = out;
    int64_t back = 0;
    REQUIRE(ordered_read_signed(in, back));
    CHECK(back == v);
    CHECK(in.empty());
  }
  std::vector<std::pair<uint64_t, std::string>> unsigned_codes = {
      {0, "\x00"s},
      {1, "\x01\x01"s},
      {255, "\x01\xff"s},
      {256, "\x02\x01\x00"s},
      {0x8000000000000001ull, "\x08\x80\x00\x00\x00\x00\x00\x00\x01"s}};
  for (auto& [v, code] : unsigned_codes) {
    std::string out;
    ordered_write_num(out, v);
    CHECK(out == code);
    std::string_view in = out;
    uint64_t back = 1;
    REQUIRE(ordered_read_num(in, back));
    CHECK(back == v);
  }
  std::string s;
  ordered_write_string(s, "\x00\x01\xff"s);
  CHECK(s == "\x00\xff\x01\xff\x00\x00\x01"s);
  // Round trips over every length of signed encoding, negative values included; the encodings
  // sort as the values do.
  std::vector<int64_t> values = {std::numeric_limits<int64_t>::min(),
                                 -(int64_t(1) << 40),
                                 -65,
                                 -64,
                                 -1,
                                 0,
                                 1,
                                 63,
                                 int64_t(1) << 50,
                                 std::numeric_limits<int64_t>::max()};
  std::string previous;
  for (auto v : values) {
    INFO(v);
    std::string out;
    ordered_write_signed(out, v);
    CHECK(previous < out);
    previous = out;
    std::string_view in = out;
    int64_t back = 0;
    REQUIRE(ordered_read_signed(in, back));
    CHECK(back == v);
    std::string_view cut(out.data(), out.size() - 1); // a proper prefix never reads
    CHECK_FALSE(ordered_read_signed(cut, back));
  }
  // A slice key: TensorFlow's layout, and its decoding.
  auto key = encode_slice_key("emb", {{0, 3}, {0, -1}});
  CHECK(key == "\x00"s
               "emb\x00\x01"s
               "\x01\x02"s
               "\x80\x83"s
               "\x80\x7f"s);
  auto decoded = decode_slice_key(key).value();
  CHECK(decoded.first == "emb");
  CHECK(decoded.second == std::vector<slice_extent>{{0, 3}, {0, -1}});
  CHECK(slice_to_string(decoded.second) == "0,3:-");
  CHECK_FALSE(decode_slice_key("\x01"s
                               "emb")
                  .ok());
  CHECK_FALSE(decode_slice_key(key.substr(0, key.size() - 1)).ok());
  CHECK_FALSE(decode_slice_key(key + "x").ok());
  CHECK_FALSE(slice_shape(shape{5, 3}, {{3, 3}, {0, -1}}).ok()); // runs past dimension 0
  CHECK(slice_shape(shape{5, 3}, {{3, 2}, {0, -1}}).value() == shape{2, 3});
  CHECK(slices_overlap(shape{5, 3}, {{0, 3}, {0, -1}}, {{2, 2}, {0, 3}}));
  CHECK_FALSE(slices_overlap(shape{5, 3}, {{0, 3}, {0, -1}}, {{3, 2}, {0, 3}}));
  CHECK_FALSE(slices_overlap(shape{5, 3}, {{0, -1}, {0, 1}}, {{0, -1}, {1, 2}}));
  CHECK_FALSE(slices_overlap(shape{5, 3}, {{0, 0}, {0, -1}}, {{0, -1}, {0, -1}})); // empty
}

TEST_CASE("partitioned variables in TensorFlow checkpoints are read whole", "[tf][checkpoint]") {
  fs::path dir = fs::temp_directory_path() / ("runnel-tfslices-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string cmd =
      "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_checkpoint.py " + dir.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::string prefix = (dir / "partitioned" / "model.ckpt-7").string();
  auto listed = list_tf_checkpoint(prefix).value();
  REQUIRE(listed.size() == 4); // the slices are not tensors of their own
  for (auto& e : listed)
    CHECK(e.unsupported.empty());
  auto all = read_tf_checkpoint(prefix, {});
  INFO(all.error().to_string());
  REQUIRE(all.ok());
  auto& emb = all->at("emb");
  REQUIRE(emb.shape() == shape{5, 3});
  for (int i = 0; i < 15; ++i)
    CHECK(emb.data<float>()[i] == float(i) * 0.5f);
  auto& w = all->at("part/w");
  REQUIRE(w.shape() == shape{2, 4});
  for (int i = 0; i < 8; ++i)
    CHECK(w.data<int64_t>()[i] == i * 10);
  auto& words = all->at("words");
  REQUIRE(words.shape() == shape{4});
  CHECK(words.data<std::string>()[1] == "bb");
  CHECK(words.data<std::string>()[2].empty());
  CHECK(words.data<std::string>()[3] == "dddd");
  CHECK(all->at("plain").data<float>()[1] == 8.0f);
  // A slice's bytes damaged: named as the variable's slice, with the shard and offset.
  auto shard = (dir / "partitioned" / "model.ckpt-7.data-00001-of-00002").string();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x55');
  }
  auto bad = read_tf_checkpoint(prefix, {"emb"});
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().to_string(),
             Catch::Contains("tensor 'emb (slice 3,2:0,3)' at byte offset 0: checksum mismatch"));
  // Slices that overlap and leave a row out, though they hold as many values as the variable.
  auto overlap = read_tf_checkpoint((dir / "overlap" / "model.ckpt-7").string(), {"emb"});
  REQUIRE_FALSE(overlap.ok());
  CHECK_THAT(overlap.error().to_string(),
             Catch::Contains("tensor 'emb' slice 2,2:0,3 overlaps its slice 0,3:0,3"));
  fs::remove_all(dir);
}
