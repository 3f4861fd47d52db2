// dataset::autotune: the hill climb on its own (fed windows of a stage modelled here), and the
// stages that take it (map, parse_examples fused or not, prefetch) giving the same elements as
// hand-set ones.
#include <filesystem>

#include "runnel/actors/data/autotune.hpp"
#include "runnel/actors/data/dataset.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_index.hpp"
#include "runnel/tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Feeds `knob` `windows` windows of 20 takes over 10 ms from a stage whose throughput at a
/// value is `rate(value)` and which starves its consumer in `starved(value)` of the takes.
/// Returns how many times the value went up.
template <class Rate, class Starved>
int climb(autotune_knob& knob, int windows, Rate rate, Starved starved) {
  int ups = 0;
  for (int w = 0; w < windows; ++w) {
    int64_t before = knob.value();
    double seconds = 0.01;
    knob.observe(int64_t(rate(before) * seconds), seconds, 20, starved(before));
    ups += knob.value() > before ? 1 : 0;
  }
  return ups;
}

} // namespace

TEST_CASE("autotune climbs while a step more pays, and stops where it does not",
          "[dataset][autotune]") {
  SECTION("a stage whose workers scale up to 3, starving its consumer below that") {
    autotune_knob knob(1, 1, 8, false);
    climb(
        knob, 100, [](int64_t v) { return 1000.0 * double(std::min<int64_t>(v, 3)); },
        [](int64_t v) { return v < 3 ? 20 : 0; });
    // At 3 the consumer no longer waits: nothing is tried beyond it.
    CHECK(knob.value() == 3);
  }
  SECTION("a stage that starves its consumer whatever it is given (no cores left)") {
    autotune_knob knob(1, 1, 8, false);
    int ups = climb(
        knob, 200, [](int64_t) { return 1000.0; }, [](int64_t) { return 20; });
    // Each try is taken back, and the next comes after twice as many windows: 2, 4, 8, ... 64.
    CHECK(knob.value() == 1);
    CHECK(ups == 7); // at windows 0, 6, 14, 26, 46, 82 and 150 of the 200
  }
  SECTION("a stage its consumer rarely waits for stays where it started") {
    autotune_knob knob(2, 1, 8, false);
    int ups = climb(
        knob, 100, [](int64_t v) { return 1000.0 * double(v); },
        [](int64_t) { return 1; }); // 1 take in 20: under a tenth
    CHECK(ups == 0);
    CHECK(knob.value() == 2);
  }
  SECTION("buffers double, up to their bound, which a cap lowers") {
    autotune_knob knob(2, 1, 64, true);
    climb(
        knob, 200, [](int64_t v) { return 1000.0 * double(v); }, [](int64_t) { return 20; });
    CHECK(knob.value() == 64);
    knob.cap(5);
    CHECK(knob.value() == 5);
    CHECK(knob.max() == 5);
    knob.cap(0); // never under the least value
    CHECK(knob.value() == 1);
  }
}

TEST_CASE("autotuned stages give what hand-set ones give", "[dataset][autotune]") {
  auto budget = autotune_thread_budget();
  REQUIRE(budget >= 1);
  SECTION("map and prefetch") {
    auto ds = dataset::range(5000)
                  .map(
                      [](element e) -> result<element> {
                        return element{tensor::scalar<int64_t>(*e[0].data<int64_t>() * 3)};
                      },
                      dataset::autotune)
                  .prefetch(dataset::autotune);
    auto s = ds.open(&test_runtime()).value();
    element e;
    int64_t n = 0;
    while (s->next(e).value()) {
      REQUIRE(*e[0].data<int64_t>() == 3 * n);
      ++n;
    }
    CHECK(n == 5000);
    auto st = s->stats();
    REQUIRE(st.size() == 3);
    CHECK(st[1].stage == "map(parallelism autotune)");
    CHECK(st[1].autotuned >= 1);
    CHECK(st[1].autotuned <= budget);
    CHECK(st[2].stage == "prefetch(autotune)");
    CHECK(st[2].autotuned >= 1);
    CHECK(st[2].autotuned <= 64);
    CHECK(st[0].autotuned == -1);
    CHECK_THAT(format_stage_stats(st), Catch::Contains("prefetch(autotune) [autotune chose "));
  }
  SECTION("parse_examples, fused with records/shuffle/batch and not") {
    namespace fs = std::filesystem;
    auto dir = fs::temp_directory_path() / "runnel_ds_autotune";
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::vector<std::string> files;
    for (int s = 0; s < 2; ++s) {
      files.push_back(shard_name((dir / "data").string(), s, 2));
      auto w = record_writer::open(files.back()).value();
      for (int64_t i = 0; i < 500; ++i)
        REQUIRE(w.write(encode_example({{"id", feature{.kind = feature_kind::int64s,
                                                       .int64s = {s * 500 + i}}}}))
                    .ok());
      REQUIRE(w.close().ok());
    }
    std::vector<feature_spec> specs{{.key = "id", .type = dtype::i64, .shape = {}}};
    auto collect = [&](const dataset& ds) {
      std::vector<int64_t> ids;
      auto s = ds.open(&test_runtime()).value();
      element e;
      while (s->next(e).value())
        for (int64_t i = 0; i < e[0].dim(0); ++i)
          ids.push_back(e[0].data<int64_t>()[i]);
      return std::make_pair(ids, s->stats());
    };
    auto base = dataset::records(files).shuffle(100, 3, false).batch(16);
    auto [hand, hand_stats] = collect(base.parse_examples(specs, 2).prefetch(2));
    auto [tuned, tuned_stats] =
        collect(base.parse_examples(specs, dataset::autotune).prefetch(dataset::autotune));
    CHECK(tuned == hand); // the same records in the same order
    CHECK(tuned.size() == 1000);
    REQUIRE(tuned_stats.size() == 2);
    CHECK(tuned_stats[0].stage ==
          "records -> shuffle(100) -> batch(16) -> parse_examples(parallelism autotune), fused");
    CHECK(tuned_stats[0].autotuned >= 1);
    CHECK(tuned_stats[0].autotuned <= budget);
    // Not fused (a map between): parse_examples is a map, autotuned the same way.
    auto unfused = dataset::records(files)
                       .map([](element e) -> result<element> { return e; })
                       .batch(16)
                       .parse_examples(specs, dataset::autotune);
    CHECK(collect(unfused).first.size() == 1000);
  }
}

TEST_CASE("parallelism and buffer sizes are checked", "[dataset][autotune]") {
  auto ds = dataset::range(3);
  auto id = [](element e) -> result<element> { return e; };
  CHECK_THROWS_WITH(ds.map(id, 0),
                    Catch::Contains("map: parallelism must be at least 1 or dataset::autotune, "
                                    "got 0"));
  CHECK_THROWS_WITH(ds.parse_examples({}, -2), Catch::Contains("parse_examples: parallelism"));
  CHECK_THROWS_WITH(ds.prefetch(0), Catch::Contains("prefetch: buffer size must be at least 1"));
}
