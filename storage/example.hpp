#pragma once
// tf.train.Example and tf.train.SequenceExample, encoded and decoded by hand (protobuf wire
// format): packed and unpacked lists are accepted, unknown fields are skipped.
//
//   auto f = decode_example(record).value();          // name -> feature
//   const feature& label = f.at("label");              // label.kind == feature_kind::int64s
//   std::string bytes = encode_example(f);             // packed encoding, keys sorted
//   std::cout << features_to_json(f);                  // {"label": {"type": "int64", ...}}

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel {

enum class feature_kind { bytes, floats, int64s };
const char* to_string(feature_kind k); // "bytes", "float", "int64"

struct feature {
  feature_kind kind = feature_kind::floats;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
  size_t size() const;
  friend bool operator==(const feature&, const feature&) = default;
};

using feature_map = std::map<std::string, feature>;

struct sequence_example {
  feature_map context;
  std::map<std::string, std::vector<feature>> feature_lists;
};

/// Decodes an Example; errors give the byte offset and what was wrong.
result<feature_map> decode_example(std::string_view bytes);
std::string encode_example(const feature_map& features);
result<sequence_example> decode_sequence_example(std::string_view bytes);
std::string encode_sequence_example(const sequence_example& s);

/// {"name": {"type": "float", "values": [1, 2]}, ...}: valid JSON for any bytes. Bytes values
/// are JSON strings when they are printable ASCII, else base64 with "encoding": "base64"; NaN
/// and infinities are the strings "NaN", "Infinity", "-Infinity".
std::string features_to_json(const feature_map& features);
/// {"context": {<features>}, "feature_lists": {"name": [<feature per step>, ...]}}.
std::string sequence_example_to_json(const sequence_example& s);
std::string base64(std::string_view bytes);

} // namespace runnel
