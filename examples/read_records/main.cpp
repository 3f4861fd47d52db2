// Writes FILE, a TFRecord file of 1,000 Examples {value: float, label: int64}, then reads it back
// through a dataset (shuffle, batch, parse) feeding a graph that sums each batch.
//   read_records FILE
#include <runnel/runnel.hpp>

#include <cstdio>

using namespace runnel;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: read_records FILE\n");
    return 2;
  }
  std::string path = argv[1];
  try {
    auto w = record_writer::open(path).value();
    for (int i = 0; i < 1000; ++i) {
      feature_map f;
      f["value"].kind = feature_kind::floats;
      f["value"].floats = {float(i)};
      f["label"].kind = feature_kind::int64s;
      f["label"].int64s = {i % 10};
      throw_if_error(w.write(encode_example(f)));
    }
    throw_if_error(w.close());

    graph g;
    auto next = iterator_get_next(g, "input", {dtype::f32, dtype::i64}, {{-1}, {-1}});
    auto total = sum(next[0]);
    auto labels = sum(next[1]);
    runtime rt;
    session s(rt, g);
    auto ds = dataset::records({path})
                  .shuffle(256, /*seed=*/1)
                  .batch(100)
                  .parse_examples({{.key = "value", .type = dtype::f32, .shape = {}},
                                   {.key = "label", .type = dtype::i64, .shape = {}}})
                  .prefetch(2);
    throw_if_error(initialize_iterator(rt, "input", ds));
    double sum = 0;
    int64_t label_sum = 0, batches = 0;
    for (;;) {
      auto out = s.run({}, {total, labels});
      if (!out && out.error().code() == error_code::out_of_range)
        break; // the end of the data
      sum += *out.value()[0].data<float>();
      label_sum += *out.value()[1].data<int64_t>();
      ++batches;
    }
    std::printf("%lld batches, sum of values %.0f, sum of labels %lld\n",
                static_cast<long long>(batches), sum, static_cast<long long>(label_sum));
    return batches == 10 && sum == 499500 && label_sum == 4500 ? 0 : 1;
  } catch (const error& e) {
    std::fprintf(stderr, "read_records: %s\n", e.what());
    return 1;
  }
}
