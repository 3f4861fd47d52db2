#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/record_index.hpp"
#include "runnel/tests/eval.hpp"
#include "runnel/tests/testdata.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

std::vector<int64_t> read_all_scalars(const dataset& ds) {
  auto stream = ds.open(&test_runtime()).value();
  std::vector<int64_t> out;
  element e;
  for (;;) {
    auto more = stream->next(e);
    REQUIRE(more.ok());
    if (!*more)
      break;
    out.push_back(*e[0].data<int64_t>());
  }
  return out;
}

/// Reads `s` to its end; the error that ended it, or ok.
status drain(element_stream& s) {
  element e;
  for (;;) {
    auto r = s.next(e);
    if (!r)
      return r.error();
    if (!*r)
      return {};
  }
}

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < from + n; ++i)
    v.push_back(i);
  return v;
}

/// Writes `shards` record files of Examples {"id": int64, "x": float[3]} under a fresh folder.
std::vector<std::string> write_shards(const std::string& name, int shards, int per_shard) {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("runnel_ds_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> files;
  int64_t id = 0;
  for (int s = 0; s < shards; ++s) {
    auto path = shard_name((dir / "data").string(), s, shards);
    auto w = record_writer::open(path).value();
    for (int i = 0; i < per_shard; ++i, ++id) {
      feature_map f;
      f["id"] = feature{.kind = feature_kind::int64s, .int64s = {id}};
      f["x"] = feature{.kind = feature_kind::floats, .floats = {float(id), 1, 2}};
      REQUIRE(w.write(encode_example(f)).ok());
    }
    REQUIRE(w.close().ok());
    files.push_back(path);
  }
  return files;
}

} // namespace

TEST_CASE("dataset stages: range, map, filter, take, skip, repeat, batch", "[dataset]") {
  CHECK(read_all_scalars(dataset::range(5)) == iota(5));
  auto doubled = dataset::range(5).map([](element e) -> result<element> {
    return element{tensor::scalar<int64_t>(*e[0].data<int64_t>() * 2)};
  });
  CHECK(read_all_scalars(doubled) == std::vector<int64_t>{0, 2, 4, 6, 8});
  auto even = dataset::range(10).filter(
      [](const element& e) -> result<bool> { return *e[0].data<int64_t>() % 2 == 0; });
  CHECK(read_all_scalars(even) == std::vector<int64_t>{0, 2, 4, 6, 8});
  CHECK(read_all_scalars(dataset::range(10).skip(3).take(4)) == iota(4, 3));
  // Shards are disjoint and together hold every element, across chunk boundaries.
  std::vector<int64_t> all;
  for (int64_t i = 0; i < 3; ++i) {
    auto part = read_all_scalars(dataset::range(200).shard(3, i));
    CHECK(part.size() == size_t(i < 2 ? 67 : 66));
    CHECK(part.front() == i);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  CHECK(all == iota(200));
  CHECK_THROWS_WITH(dataset::range(5).shard(2, 2), Catch::Contains("index 2 is not in [0, 2)"));
  auto twice = read_all_scalars(dataset::range(3).repeat(2));
  CHECK(twice == std::vector<int64_t>{0, 1, 2, 0, 1, 2});
  CHECK(read_all_scalars(dataset::range(0).repeat()).empty()); // no endless loop

  auto stream = dataset::range(7).batch(3).open(&test_runtime()).value();
  element b;
  REQUIRE(stream->next(b).value());
  check_equal(b[0], tensor::vector<int64_t>({0, 1, 2}));
  REQUIRE(stream->next(b).value());
  REQUIRE(stream->next(b).value());
  check_equal(b[0], tensor::vector<int64_t>({6})); // the smaller final batch
  CHECK_FALSE(stream->next(b).value());
  auto dropped = dataset::range(7).batch(3, /*drop_remainder=*/true);
  auto s2 = dropped.open(&test_runtime()).value();
  int n = 0;
  while (s2->next(b).value())
    ++n;
  CHECK(n == 2);
}

TEST_CASE("parallel map keeps order and prefetch delivers everything", "[dataset]") {
  auto ds = dataset::range(1000)
                .map([](element e) -> result<element> {
                  return element{tensor::scalar<int64_t>(*e[0].data<int64_t>() + 1)};
                },
                     3)
                .prefetch(16);
  CHECK(read_all_scalars(ds) == iota(1000, 1));
}

TEST_CASE("errors end a stream with the stage's message", "[dataset]") {
  auto ds = dataset::range(10).map(
      [](element e) -> result<element> {
        if (*e[0].data<int64_t>() == 4)
          return invalid_argument("element 4 is bad");
        return e;
      },
      2);
  auto stream = ds.prefetch(2).open(&test_runtime()).value();
  element e;
  int good = 0;
  status st;
  for (;;) {
    auto r = stream->next(e);
    if (!r) {
      st = r.error();
      break;
    }
    if (!*r)
      break;
    ++good;
  }
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("element 4 is bad"));
  CHECK(good <= 4);
}

TEST_CASE("shuffle is a seeded permutation that changes each epoch", "[dataset]") {
  auto ds = dataset::range(100).shuffle(30, /*seed=*/11).repeat(2);
  auto all = read_all_scalars(ds);
  REQUIRE(all.size() == 200);
  std::vector<int64_t> e1(all.begin(), all.begin() + 100), e2(all.begin() + 100, all.end());
  CHECK(e1 != iota(100));
  CHECK(e1 != e2);
  std::sort(e1.begin(), e1.end());
  std::sort(e2.begin(), e2.end());
  CHECK(e1 == iota(100));
  CHECK(e2 == iota(100));
  // The same seed gives the same order.
  CHECK(read_all_scalars(dataset::range(100).shuffle(30, 11)) ==
        read_all_scalars(dataset::range(100).shuffle(30, 11)));
  // Without reshuffling, both epochs agree.
  auto same = read_all_scalars(dataset::range(50).shuffle(10, 3, false).repeat(2));
  CHECK(std::vector<int64_t>(same.begin(), same.begin() + 50) ==
        std::vector<int64_t>(same.begin() + 50, same.end()));
}

TEST_CASE("padded_batch and bucket_by_length", "[dataset]") {
  // Sequences of length 1..6: [1], [1,2], ...
  std::vector<element> seqs;
  auto ds = dataset::range(6).map([](element e) -> result<element> {
    int64_t n = *e[0].data<int64_t>() + 1;
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(i + 1);
    return element{tensor::vector<int64_t>(v)};
  });
  auto padded = ds.padded_batch(3).open(&test_runtime()).value();
  element b;
  REQUIRE(padded->next(b).value());
  check_equal(b[0], vals<int64_t>({3, 3}, {1, 0, 0, 1, 2, 0, 1, 2, 3}));
  auto to8 = ds.padded_batch(6, {shape{8}}).open(&test_runtime()).value();
  REQUIRE(to8->next(b).value());
  CHECK(b[0].shape() == shape{6, 8});

  auto length = [](const element& e) { return e[0].dim(0); };
  // Buckets [0,3) batch 2, [3,5) batch 2, [5,inf) batch 4.
  auto bucketed = ds.bucket_by_length(length, {3, 5}, {2, 2, 4}).open(&test_runtime()).value();
  std::vector<shape> shapes;
  while (bucketed->next(b).value())
    shapes.push_back(b[0].shape());
  // Lengths 1,2 -> bucket 0 (full); 3,4 -> bucket 1 (full); 5,6 -> bucket 2 flushed at the end.
  REQUIRE(shapes.size() == 3);
  CHECK(shapes[0] == shape{2, 2});
  CHECK(shapes[1] == shape{2, 4});
  CHECK(shapes[2] == shape{2, 6});
  auto boundary =
      ds.bucket_by_length(length, {3, 5}, {2, 2, 4}, true).open(&test_runtime()).value();
  REQUIRE(boundary->next(b).value());
  CHECK(b[0].shape() == shape{2, 2}); // padded to boundary 3 - 1
  REQUIRE(boundary->next(b).value());
  CHECK(b[0].shape() == shape{2, 4}); // boundary 5 - 1
}

TEST_CASE("records() interleaves shards and parses Examples", "[dataset]") {
  auto files = write_shards("interleave", 3, 10);
  auto pattern = files[0].substr(0, files[0].size() - 13) + "*-of-00003";
  auto ds = dataset::records({pattern})
                .map(parse_examples({{.key = "id", .type = dtype::i64, .shape = {}},
                                     {.key = "x", .type = dtype::f32, .shape = {3}}}));
  auto ids = read_all_scalars(ds);
  // Round-robin over the three shards: 0, 10, 20, 1, 11, 21, ...
  REQUIRE(ids.size() == 30);
  CHECK(std::vector<int64_t>(ids.begin(), ids.begin() + 6) ==
        std::vector<int64_t>{0, 10, 20, 1, 11, 21});
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(30));

  // Batch then parse: one ParseExample per batch.
  auto batched = dataset::records(files, {.cycle_length = 1})
                     .batch(8)
                     .map(parse_examples({{.key = "id", .type = dtype::i64, .shape = {}},
                                          {.key = "x", .type = dtype::f32, .shape = {3}}}),
                          2)
                     .prefetch(2);
  auto stream = batched.open(&test_runtime()).value();
  element b;
  REQUIRE(stream->next(b).value());
  check_equal(b[0], tensor::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(b[1].shape() == shape{8, 3});
  CHECK(b[1].data<float>()[3] == 1.f);
}

TEST_CASE("records() reports a corrupt shard with its file and offset", "[dataset]") {
  auto files = write_shards("corrupt", 2, 5);
  {
    std::fstream f(files[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  auto stream = dataset::records(files).open(&test_runtime()).value();
  status st = drain(*stream);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == error_code::data_loss);
  CHECK_THAT(st.message(), Catch::Contains(files[1]));
}

TEST_CASE("an iterator op reads a dataset in a graph and is re-initialisable", "[dataset]") {
  graph g;
  auto next = iterator_get_next(g, "ds_test_iter", {dtype::i64}, {shape{-1}});
  auto total = sum(next[0]);
  session s(test_runtime(), g);
  auto before = s.run({}, {total});
  REQUIRE_FALSE(before.ok());
  CHECK(before.error().code() == error_code::failed_precondition);
  CHECK_THAT(before.error().message(), Catch::Contains("initialize_iterator"));
  auto no_stats = get_iterator_stats(test_runtime(), "ds_test_iter");
  REQUIRE_FALSE(no_stats.ok());
  CHECK_THAT(no_stats.error().message(), Catch::Contains("'ds_test_iter' is not initialized"));

  auto train = dataset::range(10).batch(4);
  auto validation = dataset::range(3).map([](element e) -> result<element> {
                      return element{tensor::scalar<int64_t>(100 + *e[0].data<int64_t>())};
                    }).batch(3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    REQUIRE(initialize_iterator(test_runtime(), "ds_test_iter", train).ok());
    std::vector<int64_t> sums;
    for (;;) {
      auto r = s.run({}, {total});
      if (!r) {
        CHECK(r.error().code() == error_code::out_of_range);
        break;
      }
      sums.push_back(*r.value()[0].data<int64_t>());
    }
    CHECK(sums == std::vector<int64_t>{6, 22, 17});
    // What the iterator served this epoch: three batches (the end-of-sequence asks count as
    // waits, not elements), and its dataset's stages.
    auto st = get_iterator_stats(test_runtime(), "ds_test_iter").value();
    CHECK(st.elements == 3);
    CHECK(st.wait_seconds > 0);
    REQUIRE(st.stages.size() == 2);
    CHECK(st.stages[0].stage == "range(10)");
    CHECK(st.stages[1].stage == "batch(4)");
    CHECK(st.stages[1].elements == 3);
    // Switch to validation data, then back (next epoch).
    REQUIRE(initialize_iterator(test_runtime(), "ds_test_iter", validation).ok());
    CHECK(*s.run({}, {total}).value()[0].data<int64_t>() == 303);
  }
  // A dataset with the wrong dtype is reported by name.
  REQUIRE(initialize_iterator(test_runtime(), "ds_test_iter",
                              dataset::from_tensors({tensor::vector<float>({1})}))
              .ok());
  auto wrong = s.run({}, {total});
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(wrong.error().message(), Catch::Contains("float32"));
}

TEST_CASE("records from TensorFlow (spotify featran shards) through a dataset", "[dataset]") {
  auto first = testdata("tfrecord/spotify_featran/train/part-00000-of-00005.tfrecords");
  auto pattern = first.substr(0, first.size() - std::string("00000-of-00005.tfrecords").size()) +
                 "*-of-00005.tfrecords";
  auto ds = dataset::records({pattern})
                .map(parse_examples({{.key = "label", .type = dtype::f32, .shape = {1}},
                                     {.key = "f1", .type = dtype::f32, .shape = {1}}}),
                     2)
                .batch(100);
  auto stream = ds.open(&test_runtime()).value();
  element b;
  int64_t n = 0;
  while (stream->next(b).value())
    n += b[0].dim(0);
  CHECK(n == 158 + 158 + 159 + 159 + 158);
}

TEST_CASE("records().shuffle() shuffles places in the files, every record once", "[dataset]") {
  auto files = write_shards("fused", 3, 20);
  // A GZIP copy of one shard: compressed files cannot be addressed and are buffered whole.
  auto gz = files[2] + ".gz";
  {
    auto r = record_reader::open(files[2]).value();
    auto w = record_writer::open(gz, record_compression::gzip).value();
    std::string rec;
    while (r.next(rec).value())
      REQUIRE(w.write(rec).ok());
    REQUIRE(w.close().ok());
  }
  auto parse = parse_examples({{.key = "id", .type = dtype::i64, .shape = {}}});
  auto ids = read_all_scalars(dataset::records({files[0], files[1], gz}).shuffle(25, 9).map(parse));
  REQUIRE(ids.size() == 60);
  CHECK(ids != iota(60));
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(60));
  // Seeded: the same order again.
  CHECK(read_all_scalars(dataset::records({files[0], files[1], gz}).shuffle(25, 9).map(parse)) ==
        ids);
  // A corrupt payload is found when its record is emitted, with the file and offset.
  {
    std::fstream f(files[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x55');
  }
  auto stream = dataset::records({files[0], files[1]}).shuffle(100, 1).open(&test_runtime()).value();
  status st = drain(*stream);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == error_code::data_loss);
  CHECK_THAT(st.message(), Catch::Contains(files[1] + ":0: bad data CRC"));
}

TEST_CASE("parse_examples after records/shuffle/batch parses in place like map(parse)",
          "[dataset]") {
  auto files = write_shards("fusedparse", 3, 30);
  std::vector<feature_spec> specs{{.key = "id", .type = dtype::i64, .shape = {}},
                                  {.key = "x", .type = dtype::f32, .shape = {3}}};
  auto collect = [&](const dataset& ds) {
    std::vector<element> out;
    auto s = ds.open(&test_runtime()).value();
    element e;
    while (s->next(e).value())
      out.push_back(e);
    return out;
  };
  for (int parallelism : {1, 3}) {
    for (bool shuffled : {false, true}) {
      auto base = dataset::records(files, {.cycle_length = 2});
      if (shuffled)
        base = base.shuffle(40, 5, /*reshuffle_each_iteration=*/false);
      auto fused = collect(base.batch(8).parse_examples(specs, parallelism).prefetch(2));
      auto plain = collect(base.batch(8).map(parse_examples(specs)));
      INFO("parallelism " << parallelism << ", shuffled " << shuffled);
      REQUIRE(fused.size() == plain.size());
      REQUIRE(fused.size() == 12); // 90 records: 11 batches of 8 and one of 2
      for (size_t i = 0; i < fused.size(); ++i) {
        check_equal(fused[i][0], plain[i][0]);
        check_equal(fused[i][1], plain[i][1]);
      }
    }
  }
  auto dropped = collect(dataset::records(files).batch(8, true).parse_examples(specs));
  CHECK(dropped.size() == 11);
  // A corrupt record is reported with its file and offset.
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x01');
  }
  auto s = dataset::records(files).batch(8).parse_examples(specs, 2).open(&test_runtime()).value();
  status st = drain(*s);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains(files[0] + ":0: bad data CRC"));
}

TEST_CASE("a fused record pipeline dropped mid-epoch stops its reading threads", "[dataset]") {
  // The readers run ahead on workers of their own (given two cores): dropping the stream while
  // they read, or while they wait for room, neither hangs nor frees records they still hold.
  auto files = write_shards("fuseddrop", 2, 600);
  std::vector<feature_spec> specs{{.key = "id", .type = dtype::i64, .shape = {}},
                                  {.key = "x", .type = dtype::f32, .shape = {3}}};
  for (int i = 0; i < 20; ++i) {
    auto ds = dataset::records(files, {.cycle_length = 2})
                  .shuffle(size_t(1 + i * 37), uint64_t(i))
                  .batch(16)
                  .parse_examples(specs, 1 + i % 3);
    auto s = ds.open(&test_runtime()).value();
    element e;
    for (int b = 0; b < i % 4; ++b) {
      REQUIRE(s->next(e).value());
      CHECK(e[0].dim(0) == 16);
    }
  }
  // Read to the end, every record comes once.
  auto s = dataset::records(files)
               .shuffle(100, 3)
               .batch(50)
               .parse_examples(specs, 2)
               .open(&test_runtime())
               .value();
  std::vector<int64_t> ids;
  element e;
  while (s->next(e).value())
    for (int64_t k = 0; k < e[0].dim(0); ++k)
      ids.push_back(e[0].data<int64_t>()[k]);
  std::sort(ids.begin(), ids.end());
  CHECK(ids.size() == 1200);
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());

  // More shards read at once than workers (a worker reads several), shards of different
  // lengths ending at different times: the same records in the same order as read in line.
  auto more = write_shards("fuseddrop5", 5, 0);
  for (size_t k = 0; k < more.size(); ++k) {
    auto w = record_writer::open(more[k]).value();
    for (int r = 0; r < 40 + 70 * int(k % 3); ++r) {
      feature_map f;
      f["id"] = feature{.kind = feature_kind::int64s, .int64s = {int64_t(k * 1000 + size_t(r))}};
      f["x"] = feature{.kind = feature_kind::floats, .floats = {float(r), 1, 2}};
      REQUIRE(w.write(encode_example(f)).ok());
    }
    REQUIRE(w.close().ok());
  }
  auto base = dataset::records(more, {.cycle_length = 3}).shuffle(50, 9, false).batch(10);
  auto fused = base.parse_examples(specs, 2).open(&test_runtime()).value();
  auto plain = base.map(parse_examples(specs)).open(&test_runtime()).value();
  element a, b;
  int batches = 0;
  while (plain->next(b).value()) {
    REQUIRE(fused->next(a).value());
    check_equal(a[0], b[0]);
    ++batches;
  }
  CHECK_FALSE(fused->next(a).value());
  CHECK(batches == 48); // 40 + 110 + 180 + 40 + 110 records
}

TEST_CASE("iterators and queues are found whatever device their ops land on", "[dataset]") {
  runtime rt(runtime_options{.cpu_devices = 2});
  graph g;
  std::vector<output> next;
  {
    auto d = g.device("/cpu:1");
    next = iterator_get_next(g, "multi_device_iter", {dtype::i64}, {shape{}});
  }
  auto q = fifo_queue(g, {dtype::i64}, {.shapes = {{}}}, "multi_device_queue");
  operation enq;
  {
    auto d = g.device("/cpu:1");
    enq = q.enqueue({next[0]});
  }
  auto deq = q.dequeue()[0]; // no device: it must find the queue its enqueue filled
  session s(rt, g);
  REQUIRE(initialize_iterator(rt, "multi_device_iter", dataset::range(3)).ok());
  for (int i = 0; i < 3; ++i)
    REQUIRE(s.run({enq}).ok());
  for (int64_t i = 0; i < 3; ++i) {
    auto r = s.run({}, {deq});
    INFO((r.ok() ? std::string("ok") : r.error().to_string()));
    REQUIRE(r.ok());
    CHECK(*r.value()[0].data<int64_t>() == i);
  }
}

#include <random>

#include "runnel/actors/data/record_arena.hpp"

TEST_CASE("a shuffle window's arena keeps records intact and reuses freed slots", "[dataset]") {
  record_arena arena;
  std::mt19937 rng(3);
  struct held {
    char* p;
    size_t n;
    char fill;
  };
  std::vector<held> live;
  auto check = [](const held& h) {
    return std::all_of(h.p, h.p + h.n, [&](char c) { return c == h.fill; });
  };
  // Sizes from empty to past the largest slot (256 KiB: those get an allocation of their own),
  // held in a window and freed in random order, as a shuffle does.
  for (int i = 0; i < 20'000; ++i) {
    size_t n = i % 997 == 0 ? 300'000 + size_t(rng() % 1000) : size_t(rng() % 5000);
    held h{arena.allocate(n), n, char('a' + i % 26)};
    REQUIRE((n == 0 || reinterpret_cast<uintptr_t>(h.p) % 64 == 0));
    std::memset(h.p, h.fill, n);
    live.push_back(h);
    if (live.size() > 1000) {
      size_t k = rng() % live.size();
      REQUIRE(check(live[k]));
      arena.release(live[k].p, live[k].n);
      live[k] = live.back();
      live.pop_back();
    }
  }
  for (auto& h : live)
    REQUIRE(check(h));
  // A window of ~1000 records of up to 5000 bytes holds ~2.5 MB; freed slots are reused, so the
  // arena stays within a small multiple of that instead of growing with all 20,000 records.
  CHECK(arena.reserved_bytes() < size_t(16) << 20);
  // What is still held when the arena goes (a stream dropped mid-epoch), large records
  // included, goes with it: the sanitizer build's leak check sees any that does not.
  std::memset(arena.allocate(400'000), 'z', 400'000);
  for (auto& h : live)
    if (h.n % 2 == 0)
      arena.release(h.p, h.n);
}

TEST_CASE("an opened dataset counts what each of its stages did", "[dataset]") {
  auto ds = dataset::range(100)
                .map([](element e) -> result<element> { return e; })
                .repeat(2)
                .batch(10)
                .prefetch(2);
  auto stream = ds.open(&test_runtime()).value();
  element e;
  int batches = 0;
  while (stream->next(e).value())
    ++batches;
  CHECK(batches == 20);
  auto st = stream->stats();
  REQUIRE(st.size() == 5);
  // Source first; repeat opens range and map again each epoch: they go on counting.
  CHECK(st[0].stage == "range(100)");
  CHECK(st[0].elements == 200);
  CHECK(st[1].stage == "map");
  CHECK(st[1].elements == 200);
  CHECK(st[2].stage == "repeat(2)");
  CHECK(st[3].stage == "batch(10)");
  CHECK(st[3].elements == 20);
  CHECK(st[4].stage == "prefetch(2)");
  CHECK(st[4].elements == 20);
  for (auto& s : st) {
    INFO(s.stage);
    CHECK(s.seconds >= 0);
    CHECK(s.calls > 0);
    CHECK((s.stage == "prefetch(2)" ? s.buffer_fill >= 0 && s.buffer_fill <= 1
                                    : s.buffer_fill == -1));
  }
  auto table = format_stage_stats(st);
  CHECK_THAT(table, Catch::Contains("prefetch(2)"));
  CHECK_THAT(table, Catch::Contains("own rate/s"));

  // A fused pipeline is one stage, named for all it does.
  auto files = write_shards("stagestats", 2, 10);
  auto fused = dataset::records(files)
                   .shuffle(8, 1)
                   .batch(4)
                   .parse_examples({{.key = "id", .type = dtype::i64, .shape = {}}}, 2)
                   .open(&test_runtime())
                   .value();
  while (fused->next(e).value()) {
  }
  auto fs = fused->stats();
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].stage == "records -> shuffle(8) -> batch(4) -> parse_examples(parallelism 2), fused");
  CHECK(fs[0].elements == 5);
}
