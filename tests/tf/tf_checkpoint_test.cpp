// TensorFlow V2 checkpoints: files written by tests/tf/make_tf_checkpoint.py (its own encoders,
// as TensorFlow's BundleWriter and table builder write them) read back value by value; Runnel's
// writer producing the same bytes; HDF5 <-> TensorFlow round trips; corrupt and missing files
// named with their byte offsets; the saver saving and restoring in TensorFlow's format.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/tf/sstable.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

struct fixture_dir {
  fs::path path = fs::temp_directory_path() / ("runnel-tfckpt-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(std::rand()));
  fixture_dir() {
    fs::create_directories(path);
    std::string cmd =
        "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_checkpoint.py " + path.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  ~fixture_dir() { fs::remove_all(path); }
  std::string prefix(const std::string& kind) const {
    return (path / kind / "model.ckpt-1234").string();
  }
};

std::string bytes_of(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

/// The values make_tf_checkpoint.py writes, by the same formulas.
void check_fixture_values(const std::map<std::string, tensor>& t) {
  REQUIRE(t.size() == 36);
  auto& kernel = t.at("dense/kernel");
  REQUIRE(kernel.type() == dtype::f32);
  REQUIRE(kernel.shape() == shape{3, 4});
  for (int i = 0; i < 12; ++i)
    CHECK(kernel.data<float>()[i] == float(i) * 0.25f - 1);
  CHECK(t.at("dense/bias").data<float>()[2] == 1.5f);
  REQUIRE(t.at("global_step").type() == dtype::i64);
  CHECK(t.at("global_step").shape().rank() == 0);
  CHECK(t.at("global_step").data<int64_t>()[0] == 1234);
  auto& vocab = t.at("vocab");
  REQUIRE(vocab.type() == dtype::string);
  CHECK(vocab.data<std::string>()[0] == "alpha");
  CHECK(vocab.data<std::string>()[1].empty());
  CHECK(vocab.data<std::string>()[2] == "gamma \xce\xb4");
  auto& mask = t.at("mask");
  REQUIRE(mask.type() == dtype::boolean);
  CHECK(mask.data<bool>()[0]);
  CHECK_FALSE(mask.data<bool>()[1]);
  CHECK(t.at("half").type() == dtype::f16);
  CHECK(t.at("half").data<uint16_t>()[1] == 0xc000); // -2.0 in IEEE half
  for (int i = 0; i < 30; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "layer_%02d/w", i);
    CHECK(t.at(name).data<float>()[1] == -float(i));
  }
}

} // namespace

TEST_CASE("TensorFlow V2 checkpoints are read: one block, many snappy blocks, two data shards",
          "[tf][checkpoint]") {
  fixture_dir fx;
  for (auto kind : {"plain", "blocks", "sharded"}) {
    INFO(kind);
    auto p = fx.prefix(kind);
    CHECK(is_tf_checkpoint(p));
    CHECK(is_tf_checkpoint(p + ".index"));
    auto all = read_tf_checkpoint(p, {});
    INFO(all.error().to_string());
    REQUIRE(all.ok());
    check_fixture_values(*all);
    auto listed = list_tf_checkpoint(p).value();
    REQUIRE(listed.size() == 36);
    CHECK(listed.front().name == "dense/bias");
    CHECK(listed.back().name == "vocab");
  }
  CHECK_FALSE(is_tf_checkpoint(fx.prefix("missing")));
  // The state file TensorFlow wrote on another machine: numbers skipped, absolute paths mapped.
  auto st = read_checkpoint_state((fx.path / "plain").string()).value();
  CHECK(st.latest == "model.ckpt-1234");
  CHECK(st.all.back() == "model.ckpt-1234");
  CHECK(st.all.front() == "/home/someone/train/model.ckpt-1000"); // not here: left as written
}

TEST_CASE("Runnel writes TensorFlow's bytes, and HDF5 <-> TensorFlow round trips are exact",
          "[tf][checkpoint]") {
  fixture_dir fx;
  auto values = read_tf_checkpoint(fx.prefix("blocks"), {}).value();
  auto out = (fx.path / "ours" / "model.ckpt-1234").string();
  REQUIRE(write_tf_checkpoint(out, values).ok());
  // TensorFlow's defaults (one uncompressed block, LevelDB's separator keys): the same bytes.
  CHECK(bytes_of(out + ".index") == bytes_of(fx.prefix("plain") + ".index"));
  CHECK(bytes_of(out + ".data-00000-of-00001") ==
        bytes_of(fx.prefix("plain") + ".data-00000-of-00001"));
  auto h5 = (fx.path / "model.h5").string();
  REQUIRE(write_checkpoint(h5, values, 1234).ok());
  auto back = read_checkpoint(h5).value();
  auto again = (fx.path / "again" / "model.ckpt-1234").string();
  REQUIRE(write_tf_checkpoint(again, back.tensors).ok());
  CHECK(bytes_of(again + ".index") == bytes_of(fx.prefix("plain") + ".index"));
  CHECK(bytes_of(again + ".data-00000-of-00001") ==
        bytes_of(fx.prefix("plain") + ".data-00000-of-00001"));
}

TEST_CASE("tables of many blocks, with and without snappy, read back what was added",
          "[tf][checkpoint]") {
  for (bool snappy : {false, true}) {
    tf::table_builder b({.block_size = 128, .restart_interval = 4, .snappy = snappy});
    std::vector<std::pair<std::string, std::string>> rows;
    for (int i = 0; i < 500; ++i) {
      char key[32];
      std::snprintf(key, sizeof key, "scope/layer_%04d/kernel", i);
      rows.emplace_back(key, std::string(size_t(i % 37), char('a' + i % 26)));
      REQUIRE(b.add(rows.back().first, rows.back().second).ok());
    }
    CHECK(b.add("a", "out of order").code() == error_code::invalid_argument);
    auto bytes = b.finish();
    auto read = tf::read_table(bytes, "t.index");
    INFO(read.error().to_string());
    REQUIRE(read.ok());
    CHECK(*read == rows);
  }
}

TEST_CASE("corrupt, truncated and missing TensorFlow checkpoint files are named with offsets",
          "[tf][checkpoint]") {
  fixture_dir fx;
  auto p = fx.prefix("plain");
  auto index = bytes_of(p + ".index"), data = bytes_of(p + ".data-00000-of-00001");
  // A flipped byte inside the data block of the index.
  auto bad = index;
  bad[20] ^= 0x40;
  write_bytes(p + ".index", bad);
  auto r = read_tf_checkpoint(p, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == error_code::data_loss);
  CHECK_THAT(r.error().message(), Catch::Contains(p + ".index at byte offset 0") &&
                                      Catch::Contains("checksum mismatch"));
  // Not a table at all.
  write_bytes(p + ".index", "not a table, just some text that is long enough for a footer...");
  CHECK_THAT(list_tf_checkpoint(p).error().message(), Catch::Contains("magic number"));
  write_bytes(p + ".index", index);
  // A flipped byte in a tensor's data: that tensor is named, with its offset.
  auto tensors = list_tf_checkpoint(p).value();
  bad = data;
  bad[0] ^= 0x01; // dense/bias comes first
  write_bytes(p + ".data-00000-of-00001", bad);
  auto t = read_tf_checkpoint(p, {"dense/bias"});
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code() == error_code::data_loss);
  CHECK_THAT(t.error().message(), Catch::Contains("data-00000-of-00001: tensor 'dense/bias' at "
                                                  "byte offset 0: checksum mismatch"));
  CHECK(read_tf_checkpoint(p, {"dense/kernel"}).ok()); // the others are whole
  // A truncated shard, then a missing one.
  write_bytes(p + ".data-00000-of-00001", data.substr(0, data.size() / 2));
  auto cut = read_tf_checkpoint(p, {});
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.error().message(), Catch::Contains("runs past the shard's end"));
  fs::remove(p + ".data-00000-of-00001");
  auto gone = read_tf_checkpoint(p, {"dense/bias"});
  CHECK(gone.error().code() == error_code::not_found);
  CHECK_THAT(gone.error().message(), Catch::Contains("data shard " + p + ".data-00000-of-00001"));
  // A name the checkpoint lacks lists what it has.
  auto absent = read_tf_checkpoint(fx.prefix("sharded"), {"dense/weights"});
  CHECK(absent.error().code() == error_code::not_found);
  CHECK_THAT(absent.error().message(), Catch::Contains("dense/bias, dense/kernel"));
}

TEST_CASE("the saver saves in TensorFlow's format and restores TensorFlow's checkpoints",
          "[tf][checkpoint]") {
  fixture_dir fx;
  graph g;
  auto kernel = variable(g, zeros(g, dtype::f32, {3, 4}), "dense/kernel");
  auto bias = variable(g, zeros(g, dtype::f32, {4}), "dense/bias");
  auto init = global_variables_initializer(g);
  runtime rt;
  session s(rt, g);
  REQUIRE(s.run({init}).ok());
  saver sv(g, {}, saver_options{.max_to_keep = 2, .format = checkpoint_format::tensorflow});
  // What the Python writer made, found through its state file (another machine's paths).
  auto latest = saver::latest_checkpoint((fx.path / "plain").string());
  INFO(latest.error().to_string());
  REQUIRE(latest.ok());
  CHECK(*latest == fx.prefix("plain"));
  REQUIRE(sv.restore(s, *latest).ok());
  auto k = s.run({}, {kernel.value}).value()[0];
  CHECK(k.data<float>()[5] == 0.25f);
  // Saved in TensorFlow's format, old ones dropped, and back.
  auto dir = fx.path / "train";
  std::string path;
  for (int step : {1, 2, 3})
    path = sv.save(s, (dir / "model.ckpt").string(), step).value();
  CHECK(path == (dir / "model.ckpt-3").string());
  CHECK(fs::exists(path + ".index"));
  CHECK_FALSE(fs::exists((dir / "model.ckpt-1.index").string()));
  CHECK_FALSE(fs::exists((dir / "model.ckpt-1.data-00000-of-00001").string()));
  CHECK(read_tf_checkpoint(path, {"dense/bias"}).value().at("dense/bias").data<float>()[0] == 0.5f);
  REQUIRE(s.run({init}).ok()); // zeros again
  REQUIRE(sv.restore(s, saver::latest_checkpoint(dir.string()).value()).ok());
  CHECK(s.run({}, {bias.value}).value()[0].data<float>()[3] == -1.5f);
}
