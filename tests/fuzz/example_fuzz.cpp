// tf.train.Example and SequenceExample decoding, and the fast parser with fixed, padded and
// sparse features of every dtype, single and batched.
#include <span>

#include "runnel/storage/example.hpp"
#include "runnel/storage/example_parse.hpp"

using namespace runnel;

namespace {
const example_parser& parser() {
  static const example_parser p({
      {.key = "f", .type = dtype::f32, .shape = shape{3}},
      {.key = "i", .type = dtype::i64, .shape = shape{}, .default_value = tensor::scalar<int64_t>(0)},
      {.key = "s", .type = dtype::string, .layout = feature_layout::padded},
      {.key = "v", .type = dtype::f32, .layout = feature_layout::sparse},
      {.key = "w", .type = dtype::i64, .layout = feature_layout::padded},
  });
  return p;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto e = decode_example(bytes); e.ok())
    (void)encode_example(*e);
  if (auto s = decode_sequence_example(bytes); s.ok())
    (void)encode_sequence_example(*s);
  std::vector<tensor> out;
  (void)parser().parse_single(bytes, out);
  std::string_view batch[] = {bytes, bytes.substr(0, size / 2)};
  (void)parser().parse_batch(std::span<const std::string_view>(batch), out);
  static const std::vector<feature_spec> context = {
      {.key = "len", .type = dtype::i64, .shape = shape{}, .default_value = tensor::scalar<int64_t>(0)}};
  static const std::vector<feature_spec> sequence = {
      {.key = "tokens", .type = dtype::i64, .layout = feature_layout::padded},
      {.key = "words", .type = dtype::string, .layout = feature_layout::padded}};
  (void)parse_single_sequence_example(bytes, context, sequence, out);
  return 0;
}
