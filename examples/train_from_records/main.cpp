// Trains a classifier from TFRecord files of Examples whose images are raw bytes, as
// docs/howto/tfrecords-into-training.md walks through:
//   train_from_records DIR          writes DIR/train-0000i-of-00002 (if absent), then trains
// Each record: image_raw (8x8 pixels, one byte each), label (int64, 0-3), height and width. The
// classes are bright in one quadrant each, so a linear model learns them.
#include <runnel/runnel.hpp>
#include <runnel/storage/record_index.hpp> // shard_name

#include <cstdio>
#include <filesystem>
#include <random>

using namespace runnel;
namespace fs = std::filesystem;

constexpr int side = 8, pixels = side * side, classes = 4;

/// Two shards of 1,000 records each, written as a TensorFlow pipeline would write them.
std::vector<std::string> write_records(const std::string& dir) {
  fs::create_directories(dir);
  std::vector<std::string> files;
  std::mt19937 rng(7);
  for (int shard = 0; shard < 2; ++shard) {
    files.push_back(dir + "/" + shard_name("train", shard, 2));
    if (fs::exists(files.back()))
      continue;
    auto w = record_writer::open(files.back()).value();
    for (int i = 0; i < 1000; ++i) {
      int label = int(rng() % classes);
      std::string image(pixels, '\0');
      for (int p = 0; p < pixels; ++p) {
        int quadrant = (p / side >= side / 2) * 2 + (p % side >= side / 2);
        image[size_t(p)] = char(quadrant == label ? 160 + rng() % 90 : rng() % 60);
      }
      feature_map f;
      f["image_raw"] = {.kind = feature_kind::bytes, .bytes = {image}};
      f["label"] = {.kind = feature_kind::int64s, .int64s = {label}};
      f["height"] = {.kind = feature_kind::int64s, .int64s = {side}};
      f["width"] = {.kind = feature_kind::int64s, .int64s = {side}};
      throw_if_error(w.write(encode_example(f)));
    }
    throw_if_error(w.close());
  }
  return files;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: train_from_records DIR\n");
    return 2;
  }
  try {
    auto files = write_records(argv[1]);

    // The graph reads batches from the iterator "train": image_raw as strings, label as int64.
    graph g;
    auto next = iterator_get_next(g, "train", {dtype::string, dtype::i64}, {{-1}, {-1}});
    auto bytes = decode_raw(next[0], dtype::u8);                 // [batch, 64] uint8
    auto images = cast(bytes, dtype::f32) / constant(g, 255.0f); // [batch, 64] in [0, 1]
    auto w = variable(g, zeros(g, dtype::f32, {pixels, classes}), "w");
    auto b = variable(g, zeros(g, dtype::f32, {classes}), "b");
    auto logits = bias_add(matmul(images, w.value), b.value);
    auto loss = mean(sparse_softmax_cross_entropy_with_logits(logits, next[1]).first);
    auto correct = mean(cast(equal(argmax(logits, 1), next[1]), dtype::f32));
    auto train = adam_optimizer(0.05).minimize(loss);

    runtime rt;
    session s(rt, g);
    throw_if_error(s.run({global_variables_initializer(g)}));
    // The pipeline: both shards interleaved, shuffled, batched, then parsed a batch at a time.
    auto pipeline = dataset::records(files)
                        .shuffle(1000, /*seed=*/1)
                        .batch(100)
                        .parse_examples({{.key = "image_raw", .type = dtype::string, .shape = {}},
                                         {.key = "label", .type = dtype::i64, .shape = {}}})
                        .prefetch(2);
    double accuracy = 0;
    for (int epoch = 1; epoch <= 3; ++epoch) {
      throw_if_error(initialize_iterator(rt, "train", pipeline));
      double sum = 0;
      int steps = 0;
      for (;;) {
        auto out = s.run({}, {correct}, {train});
        if (!out && out.error().code() == error_code::out_of_range)
          break; // the end of the epoch
        sum += out.value()[0].data<float>()[0];
        ++steps;
      }
      accuracy = sum / steps;
      std::printf("epoch %d: %d steps, training accuracy %.3f\n", epoch, steps, accuracy);
    }
    return accuracy > 0.95 ? 0 : 1;
  } catch (const error& e) {
    std::fprintf(stderr, "train_from_records: %s\n", e.what());
    return 1;
  }
}
