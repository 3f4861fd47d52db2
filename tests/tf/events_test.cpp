// TensorBoard event files: summary ops, the summary_writer, and reading files TensorFlow wrote
// (made by tests/tf/make_tf_graphs.py with its own encoder, as TensorFlow frames them).
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/storage/tf/events.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("runnel-events-" + std::to_string(::getpid()) +
                                               "-" + std::to_string(std::rand()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

std::vector<event> read_all_events(const std::string& path) {
  auto r = event_reader::open(path);
  REQUIRE(r);
  std::vector<event> out;
  event e;
  while (true) {
    auto more = r->next(e);
    REQUIRE(more);
    if (!*more)
      break;
    out.push_back(e);
  }
  return out;
}

} // namespace

TEST_CASE("event files TensorFlow writes are read: scalars of TF 1 and 2, graph, histogram",
          "[tf][events]") {
  temp_dir dir;
  std::string cmd = "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_graphs.py " +
                    dir.path.string() + " 4";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto events = read_all_events(dir / "events.out.tfevents.1700000000.tfhost");
  REQUIRE(events.size() == 113);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].wall_time == 1700000000.0);
  REQUIRE(events[1].graph_nodes);
  CHECK(*events[1].graph_nodes == 29);
  int losses = 0, accuracies = 0;
  for (auto& e : events)
    for (auto& v : e.values) {
      if (v.tag == "loss") {
        ++losses;
        CHECK(v.what == summary_entry::kind::scalar);
        CHECK(v.value == Approx(2.0 / double(e.step)).epsilon(1e-6));
      } else if (v.tag == "accuracy") {
        ++accuracies;
        CHECK(v.what == summary_entry::kind::scalar);
        CHECK(v.value == Approx(double(e.step) / 100).epsilon(1e-6));
      } else {
        CHECK(v.tag == "weights");
        CHECK(v.what == summary_entry::kind::histogram);
        CHECK_THAT(v.description, Catch::Contains("1000 values in [-1, 3]"));
      }
    }
  CHECK(losses == 100);
  CHECK(accuracies == 10);
}

TEST_CASE("summary ops write scalars, histograms, images and text that read back",
          "[tf][events]") {
  temp_dir dir;
  graph g;
  auto x = placeholder(g, dtype::f32, {2, 3}, "x");
  auto loss = mean(x);
  scalar_summary("loss", loss);
  histogram_summary("x", x);
  auto img = constant(g, tensor::from_values<float>({1, 2, 2, 1}, {0, 0.5f, 1, 0.25f}), "img");
  image_summary("picture", img);
  text_summary("note", constant(g, tensor::scalar(std::string("hello, TensorBoard")), "text"));
  auto merged = merge_all_summaries(g);
  runtime rt;
  session s(rt, g);
  auto w = summary_writer::open(dir / "logs/run1");
  REQUIRE(w);
  REQUIRE(w->add_graph(g).ok());
  for (int step = 1; step <= 3; ++step) {
    auto out = s.run({{x, tensor::from_values<float>({2, 3}, {1, 2, 3, 4, 5, float(step)})}},
                     {merged});
    REQUIRE(out);
    REQUIRE(w->add_summary((*out)[0].flat<std::string>()[0], step).ok());
  }
  REQUIRE(w->add_scalar("lr", 0.125, 3).ok());
  auto path = w->path();
  CHECK(fs::path(path).filename().string().starts_with("events.out.tfevents."));
  REQUIRE(w->close().ok());
  auto events = read_all_events(path);
  REQUIRE(events.size() == 6); // version, graph, 3 summaries, lr
  CHECK(events[0].file_version == "brain.Event:2");
  REQUIRE(events[1].graph_nodes);
  CHECK(*events[1].graph_nodes == g.num_nodes());
  auto& third = events[4];
  CHECK(third.step == 3);
  std::map<std::string, summary_entry> by_tag;
  for (auto& v : third.values)
    by_tag[v.tag] = v;
  REQUIRE(by_tag.count("loss"));
  CHECK(by_tag["loss"].value == Approx((1 + 2 + 3 + 4 + 5 + 3) / 6.0));
  CHECK(by_tag["x"].what == summary_entry::kind::histogram);
  CHECK_THAT(by_tag["x"].description, Catch::Contains("6 values in [1, 5]"));
  CHECK(by_tag["picture/image"].what == summary_entry::kind::image);
  CHECK_THAT(by_tag["picture/image"].description, Catch::StartsWith("image 2x2x1"));
  CHECK(by_tag["note"].what == summary_entry::kind::text);
  CHECK_THAT(by_tag["note"].description, Catch::Contains("hello, TensorBoard"));
  CHECK(events[5].values.at(0).tag == "lr");
  CHECK(events[5].values.at(0).value == 0.125);
}

TEST_CASE("image summaries are valid PNG files", "[tf][events]") {
  graph g;
  std::vector<uint8_t> pixels(5 * 7 * 3);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = uint8_t(i * 7);
  auto img = constant(g, tensor::from_values<uint8_t>({1, 5, 7, 3}, pixels), "img");
  auto summary = image_summary("rgb", img);
  runtime rt;
  session s(rt, g);
  auto out = s.run({}, {summary});
  REQUIRE(out);
  // Find the PNG inside the serialized Summary and check its chunks by hand.
  const std::string& bytes = (*out)[0].flat<std::string>()[0];
  auto at = bytes.find("\x89PNG\r\n\x1a\n");
  REQUIRE(at != std::string::npos);
  std::string png = bytes.substr(at);
  auto be32 = [&](size_t i) {
    return uint32_t(uint8_t(png[i])) << 24 | uint32_t(uint8_t(png[i + 1])) << 16 |
           uint32_t(uint8_t(png[i + 2])) << 8 | uint32_t(uint8_t(png[i + 3]));
  };
  CHECK(png.substr(12, 4) == "IHDR");
  CHECK(be32(16) == 7); // width
  CHECK(be32(20) == 5); // height
  CHECK(png[25] == 2);  // RGB
  size_t idat = png.find("IDAT");
  REQUIRE(idat != std::string::npos);
  uint32_t len = be32(idat - 4);
  std::vector<uint8_t> raw(5 * (7 * 3 + 1));
  uLongf raw_len = uLongf(raw.size());
  REQUIRE(uncompress(raw.data(), &raw_len,
                     reinterpret_cast<const Bytef*>(png.data() + idat + 4), len) == Z_OK);
  CHECK(raw_len == raw.size());
  CHECK(raw[1 + 7 * 3 + 1] == pixels[7 * 3]); // row 1's first byte after its filter byte
}

TEST_CASE("damaged event files and foreign summaries give errors naming the file", "[tf][events]") {
  temp_dir dir;
  auto w = summary_writer::open(dir / "logs");
  REQUIRE(w);
  for (int i = 0; i < 10; ++i)
    REQUIRE(w->add_scalar("loss", i, i).ok());
  auto bad = w->add_summary("\xff\xff\xff not a summary", 1);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.message(), Catch::Contains("not a serialized Summary"));
  auto path = w->path();
  REQUIRE(w->close().ok());
  fs::resize_file(path, fs::file_size(path) - 5);
  auto r = event_reader::open(path);
  REQUIRE(r);
  event e;
  status last;
  int n = 0;
  while (true) {
    auto more = r->next(e);
    if (!more) {
      last = more.error();
      break;
    }
    REQUIRE(*more);
    ++n;
  }
  CHECK(n == 10); // the version and 9 scalars; the tenth is cut
  CHECK_THAT(last.to_string(), Catch::Contains(path));
  // A record file of something else: the offset of the record is named.
  {
    auto rw = record_writer::open(dir / "other.tfrecord");
    REQUIRE(rw);
    REQUIRE(rw->write("\x0f\x00").ok()); // wire type 7 does not exist: not a protobuf message
    REQUIRE(rw->close().ok());
  }
  auto o = event_reader::open(dir / "other.tfrecord");
  REQUIRE(o);
  auto more = o->next(e);
  REQUIRE_FALSE(more);
  CHECK_THAT(more.error().to_string(), Catch::Contains("byte offset 0") &&
                                           Catch::Contains("not an Event"));
}
