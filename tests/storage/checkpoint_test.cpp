#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "runnel/storage/checkpoint.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("runnel-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

std::string run_command(const std::string& cmd, int& rc) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p))
    out.append(buf, n);
  rc = ::pclose(p);
  return out;
}

} // namespace

TEST_CASE("checkpoints round-trip every dtype, nested names and the global step", "[storage]") {
  temp_dir dir;
  std::map<std::string, tensor> in{
      {"hidden/w", tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6})},
      {"hidden/b", tensor::vector<double>({0.5, -0.5})},
      {"hidden/b/Adam", tensor::vector<double>({0.25, 0.75})}, // a slot below its variable
      {"global_step", tensor::scalar<int64_t>(1234)},
      {"ids", tensor::vector<int32_t>({1, -2, 3})},
      {"mask", tensor::vector<bool>({true, false})},
      {"bytes", tensor::vector<uint8_t>({0, 255})},
      {"half", tensor::vector<half>({half(1.5f), half(-2.f)})},
      {"names", tensor::vector<std::string>({"cat", "dog"})},
      {"empty", tensor(dtype::f32, shape{0, 4})}};
  auto path = dir / "model-1234.h5";
  REQUIRE(write_checkpoint(path, in, 1234).ok());
  CHECK_FALSE(fs::exists(path + ".tmp"));
  auto c = read_checkpoint(path);
  REQUIRE(c.ok());
  CHECK(c->global_step == 1234);
  CHECK(c->format_version == checkpoint_format_version);
  REQUIRE(c->tensors.size() == in.size());
  for (auto& [k, v] : in) {
    INFO(k);
    CHECK(equal(c->tensors.at(k), v));
  }
  auto list = list_checkpoint(path).value();
  CHECK(list.size() == in.size());
  auto w = std::find_if(list.begin(), list.end(), [](auto& e) { return e.name == "hidden/w"; });
  REQUIRE(w != list.end());
  CHECK(w->type == dtype::f32);
  CHECK(w->dims == shape({2, 3}));
  CHECK(read_checkpoint_global_step(path).value() == 1234);
}

TEST_CASE("checkpoints are readable by h5dump and h5py", "[storage]") {
  temp_dir dir;
  auto path = dir / "m.h5";
  REQUIRE(write_checkpoint(path,
                           {{"layer/kernel", tensor::from_values<float>({2, 2}, {1, 2, 3, 4})}}, 7)
              .ok());
  int rc = 0;
  auto dump = run_command("h5dump -d /layer/kernel:0 " + path, rc);
  REQUIRE(rc == 0);
  CHECK(dump.find("H5T_IEEE_F32LE") != std::string::npos);
  CHECK(dump.find("(1,0): 3, 4") != std::string::npos);
  auto py =
      run_command("/usr/bin/python3 -c \"import h5py; f = h5py.File('" + path +
                      "', 'r'); print(f['layer/kernel:0'][()].sum(), f.attrs['global_step'])\"",
                  rc);
  REQUIRE(rc == 0);
  CHECK(py.find("10.0 7") != std::string::npos);
}

TEST_CASE("Keras-style weight files written by h5py can be read", "[storage]") {
  temp_dir dir;
  auto path = dir / "keras.h5";
  int rc = 0;
  auto out = run_command("/usr/bin/python3 -c \"import h5py, numpy as np\n"
                         "f = h5py.File('" +
                             path +
                             "', 'w')\n"
                             "g = f.create_group('model_weights/dense/dense')\n"
                             "g['kernel:0'] = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
                             "g['bias:0'] = np.array([1, 2, 3], dtype=np.float32)\n"
                             "f.close()\"",
                         rc);
  INFO(out);
  REQUIRE(rc == 0);
  auto t = read_checkpoint_tensors(
      path, {"model_weights/dense/dense/kernel:0", "model_weights/dense/dense/bias:0"});
  REQUIRE(t.ok());
  CHECK(equal(t->at("model_weights/dense/dense/kernel:0"),
              tensor::from_values<float>({2, 3}, {0, 1, 2, 3, 4, 5})));
  CHECK(read_checkpoint(path)->format_version == 0); // not written by Runnel
}

TEST_CASE("missing, truncated and foreign files give clear errors", "[storage]") {
  temp_dir dir;
  auto missing = read_checkpoint(dir / "nope.h5");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == error_code::not_found);
  CHECK(missing.error().message().find("nope.h5") != std::string::npos);

  auto text = dir / "notes.h5";
  std::ofstream(text) << "not hdf5 at all";
  auto foreign = read_checkpoint(text);
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.error().code() == error_code::data_loss);

  auto path = dir / "m.h5";
  std::vector<float> big(100000, 1.f);
  REQUIRE(write_checkpoint(path, {{"w", tensor::vector<float>(big)}}, 1).ok());
  auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  auto truncated = read_checkpoint(path);
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().code() == error_code::data_loss);

  REQUIRE(write_checkpoint(path, {{"w", tensor::vector<float>({1})}}, 1).ok());
  auto absent = read_checkpoint_tensors(path, {"v"});
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.error().message() == "variable 'v' is not in checkpoint " + path);
}

TEST_CASE("the checkpoint state file round-trips", "[storage]") {
  temp_dir dir;
  CHECK(read_checkpoint_state(dir.path.string()).error().code() == error_code::not_found);
  REQUIRE(
      write_checkpoint_state(dir.path.string(), {"model-2.h5", {"model-1.h5", "model-2.h5"}}).ok());
  auto st = read_checkpoint_state(dir.path.string()).value();
  CHECK(st.latest == "model-2.h5");
  CHECK(st.all == std::vector<std::string>{"model-1.h5", "model-2.h5"});
  std::ofstream(dir / "checkpoint") << "garbage without quotes\n";
  CHECK(read_checkpoint_state(dir.path.string()).error().code() == error_code::data_loss);
}

TEST_CASE("checkpoints announcing more data than their file holds are refused before allocating",
          "[storage][security]") {
  temp_dir dir;
  std::string path = (dir.path / "huge.h5").string();
  int rc = 0;
  // A chunked dataset of 2^40 floats: HDF5 stores no chunk until one is written, so the file is
  // a few KiB; reading it used to allocate 4 TiB (and `ckpt inspect --values` grew until killed).
  auto out = run_command("/usr/bin/python3 -c \"import h5py\n"
                         "f = h5py.File('" + path + "', 'w')\n"
                         "f.create_dataset('w:0', shape=(2**40,), dtype='f4', chunks=(1024,))\n"
                         "f.create_dataset('ok:0', data=[1.0, 2.0])\n"
                         "f.close()\"",
                         rc);
  REQUIRE(rc == 0);
  auto listed = list_checkpoint(path);
  REQUIRE(listed.ok()); // the listing reads no data
  auto r = read_checkpoint_tensors(path, {"w"});
  REQUIRE(!r.ok());
  CHECK(r.error().code() == error_code::data_loss);
  CHECK_THAT(r.error().message(), Catch::Contains("more than its file"));
  CHECK(read_checkpoint_tensors(path, {"ok"}).ok());
  CHECK(!read_checkpoint(path).ok());
  auto v = verify_checkpoint_isolated(path);
  CHECK(v.code() == error_code::data_loss);
  CHECK_THAT(v.message(), Catch::Contains("huge.h5"));
}

TEST_CASE("checkpoints are verified in a child process while other threads allocate",
          "[storage]") {
  // The child is the test program executed again: it must not inherit locks that the parent's
  // busy threads hold (a forked child without exec could hang on them under a sanitizer's or
  // jemalloc's allocator).
  auto dir = std::filesystem::temp_directory_path() / "runnel_verify_threads";
  std::filesystem::create_directories(dir);
  std::string good = (dir / "good.h5").string(), bad = (dir / "bad.h5").string();
  tensor w(dtype::f32, shape{256, 64});
  for (auto& v : w.flat<float>())
    v = 0.5f;
  REQUIRE(write_checkpoint(good, {{"w", w}}, 7).ok());
  std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(bad, std::filesystem::file_size(bad) / 2);
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 4; ++t)
    busy.emplace_back([&stop] {
      while (!stop.load()) {
        std::vector<std::unique_ptr<char[]>> blocks;
        for (int i = 0; i < 64; ++i)
          blocks.push_back(std::make_unique<char[]>(size_t(64 + 4096 * i)));
      }
    });
  for (int i = 0; i < 5; ++i) { // each child is a fresh process: about 0.4 s
    INFO("round " << i);
    CHECK(verify_checkpoint_isolated(good, std::chrono::seconds(30)).ok());
    auto v = verify_checkpoint_isolated(bad, std::chrono::seconds(30));
    CHECK(v.code() == error_code::data_loss);
    CHECK_THAT(v.message(), Catch::Contains("bad.h5"));
  }
  stop = true;
  for (auto& t : busy)
    t.join();
  std::filesystem::remove_all(dir);
}
