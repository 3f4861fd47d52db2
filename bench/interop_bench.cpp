// Interop benchmarks (issue 16's targets), compared in the same run:
//   tf_import_mnist   a frozen TensorFlow MNIST CNN imported from a .pb, run over 10,000 images
//                     (batches of 100), against the same model built with Runnel's own API
//                     (the weights copied from the imported Consts): target >= 1x.
//   events_cat_1gb    `runnel events cat` (text and --json) over a 1 GB event file, against
//                     reading the file raw (read(2) in 1 MiB blocks, from the page cache):
//                     target >= 0.5x.
// usage: interop_bench RUNNEL_BINARY [tf_import_mnist|events_cat_1gb]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/events.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Best of `reps` passes over all images in batches of 100.
double time_passes(session& s, const std::string& x, const std::string& y, const tensor& images,
                   int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < images.dim(0); b += 100)
      throw_if_error(s.run({{x, images.slice(b, std::min(b + 100, images.dim(0)))}}, {y}).error());
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

const tensor& const_value(const graph& g, const std::string& name) {
  return std::get<tensor>(g.at(*g.find(name)).attrs.at("value"));
}

void tf_import_mnist(const fs::path& dir) {
  std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_graphs.py " +
                    dir.string() + " 10000";
  if (std::system(cmd.c_str()) != 0)
    throw error(status(error_code::internal, "make_tf_graphs.py failed"));
  auto images = read_npy((dir / "images.npy").string()).value();
  auto imported = import_tf_graph((dir / "mnist_cnn.pb").string()).value();
  // The same model through the builder API, with the imported weights.
  graph native;
  auto c = [&](const char* n) { return constant(native, const_value(imported, n)); };
  auto x = placeholder(native, dtype::f32, {-1, 784}, "x");
  auto h = reshape(x, {-1, 28, 28, 1});
  h = relu(bias_add(conv2d(h, c("conv1/w"), {1, 1}, "SAME"), c("conv1/b")));
  h = max_pool(h, {2, 2}, {2, 2}, "SAME");
  h = relu(bias_add(conv2d(h, c("conv2/w"), {1, 1}, "SAME"), c("conv2/b")));
  h = reshape(avg_pool(h, {2, 2}, {2, 2}, "VALID"), {-1, 784});
  h = relu(add(matmul(h, c("fc1/w")), c("fc1/b")));
  auto probs = softmax(add(matmul(h, c("fc2/w")), c("fc2/b")), "softmax");
  (void)probs;
  runtime rt;
  session si(rt, imported, {.allow_soft_placement = true});
  session sn(rt, native);
  // Same answers first: the comparison is between equal computations.
  auto a = si.run({{"x", images.slice(0, 100)}}, {"softmax"}).value()[0];
  auto b = sn.run({{"x", images.slice(0, 100)}}, {"softmax"}).value()[0];
  if (!all_close(a, b, 1e-5, 1e-6))
    throw error(status(error_code::internal, "the imported and the native model disagree"));
  // Interleaved, best of 3 each, so that both see the same machine.
  double ti = 1e30, tn = 1e30;
  for (int round = 0; round < 3; ++round) {
    ti = std::min(ti, time_passes(si, "x", "softmax", images, 1));
    tn = std::min(tn, time_passes(sn, "x", "softmax", images, 1));
  }
  double n = double(images.dim(0));
  std::printf("tf_import_mnist: imported %.0f images/s, native API %.0f images/s\n", n / ti,
              n / tn);
  std::printf("bench tf_import_mnist: %.3g images/s (%.2fx the model built with Runnel's API; "
              "target >= 1)\n",
              n / ti, tn / ti);
}

/// Reads the file raw (read(2) in 1 MiB blocks); `cold` first drops the page cache (needs root),
/// so the bytes come from storage. Returns GB/s, or 0 when the cache cannot be dropped.
double raw_read_gbps(const std::string& path, bool cold) {
  double best = 0;
  std::vector<char> buf(1 << 20);
  for (int r = 0; r < (cold ? 2 : 3); ++r) {
    if (cold) {
      ::sync();
      FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
      if (!f || std::fputs("1", f) < 0 || std::fclose(f) != 0)
        return 0;
    }
    int fd = ::open(path.c_str(), O_RDONLY);
    auto t0 = std::chrono::steady_clock::now();
    size_t total = 0;
    while (true) {
      ssize_t k = ::read(fd, buf.data(), buf.size());
      if (k <= 0)
        break;
      total += size_t(k);
    }
    ::close(fd);
    best = std::max(best, double(total) / seconds_since(t0) / 1e9);
  }
  return best;
}

void events_cat_1gb(const fs::path& dir, const std::string& runnel_binary) {
  // Per step: two scalars; every 10 steps a histogram of 1,000 values (as a training job logs).
  std::string hist_bytes;
  {
    graph g;
    auto v = random_normal(g, {1000});
    auto h = histogram_summary("weights", v);
    runtime rt;
    session s(rt, g);
    hist_bytes = s.run({}, {h}).value()[0].flat<std::string>()[0];
  }
  auto w = summary_writer::open((dir / "logs").string(), 60).value();
  auto t0 = std::chrono::steady_clock::now();
  int64_t step = 0;
  while (fs::exists(w.path()) ? fs::file_size(w.path()) < (int64_t(1) << 30) : true) {
    for (int k = 0; k < 1000; ++k, ++step) {
      throw_if_error(w.add_scalar("loss", 1.0 / double(step + 1), step));
      throw_if_error(w.add_scalar("accuracy", 0.5, step));
      if (step % 10 == 0)
        throw_if_error(w.add_summary(hist_bytes, step));
    }
    throw_if_error(w.flush());
  }
  throw_if_error(w.close());
  double size = double(fs::file_size(w.path()));
  std::printf("events_cat_1gb: wrote %.2f GB (%lld steps) in %.1f s\n", size / 1e9,
              static_cast<long long>(step), seconds_since(t0));
  double cold = raw_read_gbps(w.path(), true);
  double warm = raw_read_gbps(w.path(), false); // also brings the file back into the cache
  auto cat = [&](const char* extra) {
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      auto t1 = std::chrono::steady_clock::now();
      std::string cmd = runnel_binary + " events cat " + w.path() + extra + " > /dev/null";
      if (std::system(cmd.c_str()) != 0)
        throw error(status(error_code::internal, "runnel events cat failed"));
      best = std::min(best, seconds_since(t1));
    }
    return size / best / 1e9;
  };
  double text = cat(""), json = cat(" --json");
  std::printf("events_cat_1gb: raw read %.2f GB/s from storage (page cache dropped), %.2f GB/s "
              "from the page cache; events cat %.2f GB/s, --json %.2f GB/s (file cached)\n",
              cold, warm, text, json);
  if (cold > 0)
    std::printf("bench events_cat_1gb: %.3g GB/s (%.2fx reading the file raw from storage; --json "
                "%.2fx; target >= 0.5; %.2fx the page cache's rate)\n",
                text, text / cold, json / cold, text / warm);
  else
    std::printf("bench events_cat_1gb: %.3g GB/s (%.2fx reading the file raw from the page cache; "
                "--json %.2fx; not root: the storage rate was not measured)\n",
                text, text / warm, json / warm);
}

} // namespace

int main(int argc, char** argv) {
  reexec_with_better_blas_core(argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: interop_bench RUNNEL_BINARY [tf_import_mnist|events_cat_1gb]\n");
    return 2;
  }
  std::string only = argc > 2 ? argv[2] : "";
  fs::path dir = fs::temp_directory_path() / ("runnel-interop-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  try {
    if (only.empty() || only == "tf_import_mnist")
      tf_import_mnist(dir);
    if (only.empty() || only == "events_cat_1gb")
      events_cat_1gb(dir, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "interop_bench: %s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  if (std::getenv("RUNNEL_BENCH_KEEP")) // to profile the tools on the same files
    std::printf("kept %s\n", dir.c_str());
  else
    fs::remove_all(dir);
  return 0;
}
