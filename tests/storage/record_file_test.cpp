#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <random>
#include <sstream>

#include "runnel/storage/crc32c.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/tests/testdata.hpp"

using namespace runnel;
using runnel::testing::testdata;
namespace fs = std::filesystem;

namespace {

/// Files written by TensorFlow pipelines: ../shared/testdata, or $RUNNEL_TESTDATA.

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Every record of `path`, through next(), or with `views` through next_view, which reads raw
/// files with pread into a reused buffer.
std::vector<std::string> read_all(const std::string& path, record_reader_options o = {},
                                  bool views = false) {
  auto r = record_reader::open(path, o).value();
  std::vector<std::string> out;
  std::string rec;
  std::string_view view;
  while (views ? r.next_view(view).value() : r.next(rec).value())
    out.push_back(views ? std::string(view) : rec);
  return out;
}
std::vector<std::string> read_all_views(const std::string& path, record_reader_options o = {}) {
  return read_all(path, o, true);
}

std::string temp(const std::string& name) {
  return (fs::temp_directory_path() / ("runnel-rec-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

} // namespace

TEST_CASE("crc32c: known values, hardware and portable agree, masking", "[storage]") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);
  CHECK(crc32c_portable("123456789", 9) == 0xe3069283u);
  CHECK(crc32c("", 0) == 0u);
  std::mt19937 rng(1);
  std::string data(100003, '\0');
  for (auto& c : data)
    c = char(rng());
  // Lengths around the three-stream block sizes (3 x 256 and 3 x 4096 bytes) and odd offsets.
  for (size_t n : {0ul, 1ul, 7ul, 8ul, 9ul, 767ul, 768ul, 769ul, 1000ul, 3136ul, 4096ul, 12287ul,
                   12288ul, 12289ul, 13063ul, 50000ul, data.size() - 3})
    for (size_t off : {0ul, 3ul})
      CHECK(crc32c(data.data() + off, n) == crc32c_portable(data.data() + off, n));
  CHECK(crc32c(data.data() + 5, 1000, crc32c(data.data(), 5)) == crc32c(data.data(), 1005));
  CHECK(unmask_crc(mask_crc(0x12345678u)) == 0x12345678u);
}

TEST_CASE("files written by TensorFlow read here with the counts its README gives", "[storage]") {
  const std::vector<int> train{158, 158, 159, 159, 158}, eval{52, 53, 51, 52};
  for (int i = 0; i < 5; ++i)
    CHECK(count_records(testdata("tfrecord/spotify_featran/train/part-0000" + std::to_string(i) +
                                 "-of-00005.tfrecords"))
              .value() == train[size_t(i)]);
  for (int i = 0; i < 4; ++i)
    CHECK(count_records(testdata("tfrecord/spotify_featran/eval/part-0000" + std::to_string(i) +
                                 "-of-00004.tfrecords"))
              .value() == eval[size_t(i)]);
  auto taxi =
      record_reader::open(testdata("tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"))
          .value();
  CHECK(taxi.compression() == record_compression::gzip);
  CHECK(count_records(testdata("tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz")).value() ==
        3750);
  CHECK(read_all(testdata("tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"))[0].size() ==
        504);
  CHECK(count_records(testdata("tfrecord/tft_sequence_example.tfrecord.gz")).value() == 3);
  CHECK(count_records(testdata("tfrecord/train_elwc.tfrecord")).value() == 10);
  CHECK(count_records(testdata("tfrecord/en_fr.tfrecord")).value() == 2);
  // The first record's framing, byte for byte.
  auto raw = slurp(testdata("tfrecord/spotify_featran/train/part-00000-of-00005.tfrecords"));
  uint32_t length_crc, data_crc;
  std::memcpy(&length_crc, raw.data() + 8, 4);
  std::memcpy(&data_crc, raw.data() + 12 + 74, 4);
  CHECK(length_crc == 0xb0db77afu);
  CHECK(data_crc == 0x63e955b6u);
  CHECK(read_all(testdata("tfrecord/spotify_featran/train/part-00000-of-00005.tfrecords"))[0]
            .size() == 74);
}

TEST_CASE("records written here are byte-identical to TensorFlow's", "[storage]") {
  auto src = testdata("tfrecord/spotify_featran/train/part-00000-of-00005.tfrecords");
  auto records = read_all(src);
  auto out = temp("copy.tfrecords");
  auto w = record_writer::open(out).value();
  for (auto& r : records)
    REQUIRE(w.write(r).ok());
  REQUIRE(w.close().ok());
  CHECK(slurp(out) == slurp(src));
  fs::remove(out);
}

TEST_CASE("round trips, raw and GZIP, including empty and large records", "[storage]") {
  std::vector<std::string> records{"", "a", std::string(1 << 20, 'x'), "last"};
  for (auto c : {record_compression::none, record_compression::gzip}) {
    auto path = temp(c == record_compression::gzip ? "rt.gz" : "rt");
    auto w = record_writer::open(path, c).value();
    for (auto& r : records)
      REQUIRE(w.write(r).ok());
    REQUIRE(w.close().ok());
    CHECK(read_all(path) == records);
    CHECK(read_all_views(path) == records);
    fs::remove(path);
  }
}

TEST_CASE("next_view: records in and beyond its buffer, mixed with next() and seek", "[storage]") {
  // Sizes around the 256 KiB buffer: records that end exactly at its edge, straddle it, and
  // are larger than it.
  std::vector<std::string> records;
  std::mt19937 rng(7);
  for (size_t n : {0ul, 5ul, (256ul << 10) - 16 - 21 - 16, 100ul, 256ul << 10, 3ul, 700000ul, 9ul})
    records.push_back(std::string(n, char('a' + records.size())));
  for (int i = 0; i < 300; ++i)
    records.push_back(std::string(rng() % 5000, char('0' + i % 10)));
  // Raw files are read with pread into a buffer; compressed ones inflated into one.
  auto compression = GENERATE(record_compression::none, record_compression::gzip);
  auto path = temp(compression == record_compression::gzip ? "views.gz" : "views");
  auto w = record_writer::open(path, compression).value();
  for (auto& r : records)
    REQUIRE(w.write(r).ok());
  REQUIRE(w.close().ok());
  CHECK(read_all_views(path) == records);
  CHECK(read_all(path) == records);

  auto r = record_reader::open(path).value();
  std::string_view v;
  std::string s;
  REQUIRE(r.next_view(v).value());
  CHECK(v == records[0]);
  uint64_t second = r.offset();
  REQUIRE(r.next(s).value()); // next() and next_view() share the position
  CHECK(s == records[1]);
  REQUIRE(r.next_view(v).value());
  CHECK(v == records[2]);
  REQUIRE(r.seek(second).ok());
  REQUIRE(r.next_view(v).value());
  CHECK(v == records[1]);
  fs::remove(path);
}

TEST_CASE("corruption is reported with file and offset, or skipped and counted", "[storage]") {
  auto path = temp("corrupt");
  {
    auto w = record_writer::open(path).value();
    for (int i = 0; i < 3; ++i)
      REQUIRE(w.write("record number " + std::to_string(i)).ok());
    REQUIRE(w.close().ok());
  }
  auto good = slurp(path);
  size_t rec = 12 + 15 + 4; // each record's size on disk
  auto write_bytes = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  };
  // next() and next_view() report the same error.
  auto error_of = [&](record_reader_options o = {}) {
    status errors[2];
    for (bool views : {false, true}) {
      auto r = record_reader::open(path, o).value();
      std::string s;
      std::string_view v;
      for (;;) {
        auto more = views ? r.next_view(v) : r.next(s);
        if (!more) {
          errors[views] = more.error();
          break;
        }
        if (!*more)
          break;
      }
    }
    CHECK(errors[0].message() == errors[1].message());
    return errors[1];
  };

  SECTION("a flipped data bit") {
    auto bad = good;
    bad[rec + 12 + 3] ^= 0x10;
    write_bytes(bad);
    auto e = error_of();
    CHECK(e.code() == error_code::data_loss);
    CHECK(e.message() ==
          path + ":" + std::to_string(rec) + ": bad data CRC in a record of 15 bytes");
    record_reader_options skip;
    skip.skip_corrupt = true;
    auto r = record_reader::open(path, skip).value();
    std::string s;
    int n = 0;
    while (r.next(s).value())
      ++n;
    CHECK(n == 2);
    CHECK(r.skipped() == 1);
    CHECK(read_all_views(path, skip) ==
          std::vector<std::string>{"record number 0", "record number 2"});
  }
  SECTION("a corrupt length") {
    auto bad = good;
    bad[rec] ^= 0x01;
    write_bytes(bad);
    CHECK(error_of().message().find(":" + std::to_string(rec) + ": bad length CRC") !=
          std::string::npos);
  }
  SECTION("a truncated tail") {
    write_bytes(good.substr(0, good.size() - 6));
    auto e = error_of();
    CHECK(e.message().find(":" + std::to_string(2 * rec) + ": truncated record") !=
          std::string::npos);
  }
  SECTION("garbage") {
    write_bytes("this is not a record file at all, just text");
    CHECK(error_of().code() == error_code::data_loss);
  }
  SECTION("a missing file") {
    auto r = record_reader::open(temp("nope"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == error_code::not_found);
  }
  fs::remove(path);
}

#include "runnel/storage/record_index.hpp"

TEST_CASE("a sidecar index gives counts and random access, and notices staleness", "[storage]") {
  for (auto c : {record_compression::none, record_compression::gzip}) {
    auto path = temp(c == record_compression::gzip ? "indexed.gz" : "indexed");
    {
      auto w = record_writer::open(path, c).value();
      for (int i = 0; i < 100; ++i)
        REQUIRE(w.write("record " + std::to_string(i)).ok());
      REQUIRE(w.close().ok());
    }
    CHECK(read_record_index(path).error().code() == error_code::not_found);
    auto idx = write_record_index(path).value();
    REQUIRE(idx.offsets.size() == 100);
    CHECK(read_record_index(path).value().offsets == idx.offsets);
    CHECK(count_records(path, true).value() == 100);
    auto r = record_reader::open(path).value();
    std::string rec;
    for (int i : {57, 3, 99}) {
      REQUIRE(r.seek(idx.offsets[size_t(i)]).ok());
      REQUIRE(r.next(rec).value());
      CHECK(rec == "record " + std::to_string(i));
    }
    { // Append a record: the index is now stale.
      std::ofstream(path, std::ios::binary | std::ios::app) << "x";
      CHECK(read_record_index(path).error().code() == error_code::failed_precondition);
    }
    { // Corrupt the index itself.
      std::fstream f(record_index_path(path), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(30);
      f.put('\x7f');
    }
    CHECK(read_record_index(path).error().code() == error_code::data_loss);
    fs::remove(path);
    fs::remove(record_index_path(path));
  }
}

TEST_CASE("shard names and globs", "[storage]") {
  CHECK(shard_name("out/train", 3, 10) == "out/train-00003-of-00010");
  auto files =
      expand_record_files(testdata("tfrecord/spotify_featran/train") + "/part-*-of-00005.tfrecords")
          .value();
  REQUIRE(files.size() == 5);
  CHECK(files[0].find("part-00000-of-00005") != std::string::npos);
  CHECK(files[4].find("part-00004-of-00005") != std::string::npos);
  auto none = expand_record_files("/nonexistent/train-*");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message() == "no record files match '/nonexistent/train-*'");
}

TEST_CASE("a truncated GZIP file read through next_view reports the record cut short",
          "[storage]") {
  auto path = temp("cut.gz");
  auto w = record_writer::open(path, record_compression::gzip).value();
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) { // incompressible: the cut lands mid-stream
    std::string r(1000, '\0');
    for (auto& c : r)
      c = char(rng());
    REQUIRE(w.write(r).ok());
  }
  REQUIRE(w.close().ok());
  auto bytes = slurp(path);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  for (bool views : {false, true}) {
    auto r = record_reader::open(path).value();
    std::string s;
    std::string_view v;
    int n = 0;
    status error;
    for (;;) {
      auto more = views ? r.next_view(v) : r.next(s);
      if (!more) {
        error = more.error();
        break;
      }
      if (!*more)
        break;
      ++n;
    }
    INFO("views " << views);
    CHECK(n > 0);
    CHECK(n < 2000);
    CHECK(error.code() == error_code::data_loss);
    CHECK_THAT(error.message(), Catch::Contains("truncated record"));
  }
  fs::remove(path);
}

TEST_CASE("GZIP records are checked by their own CRCs, not the stream's CRC-32", "[storage]") {
  // Readers skip zlib's CRC-32 of the inflated stream (every byte of it is covered by a record's
  // CRC32C): damage inside the compressed data is still reported, a damaged stream CRC is not.
  auto path = temp("checked.gz");
  std::vector<std::string> records;
  for (int i = 0; i < 3000; ++i)
    records.push_back("record number " + std::to_string(i) + std::string(size_t(i % 97), 'x'));
  {
    auto w = record_writer::open(path, record_compression::gzip).value();
    for (auto& r : records)
      REQUIRE(w.write(r).ok());
    REQUIRE(w.close().ok());
  }
  auto good = slurp(path);
  auto read_all = [&](bool views, std::vector<std::string>& out) -> status {
    auto r = record_reader::open(path).value();
    std::string s;
    std::string_view v;
    for (;;) {
      auto more = views ? r.next_view(v) : r.next(s);
      if (!more)
        return more.error();
      if (!*more)
        return {};
      out.emplace_back(views ? std::string(v) : s);
    }
  };
  SECTION("a damaged stream CRC-32 loses nothing") {
    auto bad = good;
    bad[bad.size() - 8] ^= 0x01; // the trailer: CRC-32, then the length
    std::ofstream(path, std::ios::binary) << bad;
    for (bool views : {false, true}) {
      std::vector<std::string> got;
      CHECK(read_all(views, got).ok());
      CHECK(got == records);
    }
  }
  SECTION("damage inside the compressed data is reported") {
    for (size_t at : {good.size() / 5, good.size() / 3, good.size() / 2, 3 * good.size() / 4}) {
      for (unsigned char flip : {0x01, 0x20, 0x80}) {
        auto bad = good;
        bad[at] = char(bad[at] ^ flip);
        std::ofstream(path, std::ios::binary) << bad;
        for (bool views : {false, true}) {
          INFO("byte " << at << " flipped by " << int(flip) << ", views " << views);
          std::vector<std::string> got;
          status st = read_all(views, got);
          CHECK(st.code() == error_code::data_loss);
          CHECK_THAT(st.message(), Catch::StartsWith(path));
          // Whatever came before the damage is intact.
          REQUIRE(got.size() < records.size());
          CHECK(std::equal(got.begin(), got.end(), records.begin()));
        }
      }
    }
  }
  fs::remove(path);
}
