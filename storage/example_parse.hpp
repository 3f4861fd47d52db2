#pragma once
// Parsing serialized tf.train.Example records straight into tensors, without building a
// feature map: the hot path of input pipelines (ParseExample, ParseSingleExample, and the
// dataset helper parse_examples()).
//
//   example_parser p({{.key = "image", .type = dtype::f32, .shape = {784}},
//                     {.key = "label", .type = dtype::i64, .shape = {}},
//                     {.key = "tokens", .type = dtype::i64, .layout = feature_layout::padded}});
//   std::vector<tensor> out;
//   throw_if_error(p.parse_single(record, out));   // image [784], label [], tokens [n] + length
//   throw_if_error(p.parse_batch(records, out));    // image [B,784], label [B], tokens [B,max] + [B]
//
// Outputs per spec, in order: fixed → values; padded → values, lengths; sparse → indices,
// values, dense_shape (TensorFlow's SparseTensor parts). A missing fixed feature takes its default
// or is an error; a wrong type or count is an error; both name the feature and the record.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

enum class feature_layout {
  fixed,  ///< exactly `shape` values (or the default when missing)
  padded, ///< any number; batches pad with zeros and give each record's length
  sparse, ///< any number; as SparseTensor indices / values / dense_shape
};

struct feature_spec {
  std::string key;
  dtype type = dtype::f32; ///< float32, int64 or string
  runnel::shape shape{};   ///< fixed features only
  feature_layout layout = feature_layout::fixed;
  std::optional<tensor> default_value; ///< fixed features: used when the feature is missing
};

class example_parser {
public:
  /// Checks the specs (types, defaults matching shapes, unique keys).
  static result<example_parser> create(std::vector<feature_spec> specs);
  explicit example_parser(std::vector<feature_spec> specs) : example_parser(create(std::move(specs)).value()) {}

  const std::vector<feature_spec>& specs() const { return specs_; }
  /// The dtypes and shapes of the outputs, per spec as described above.
  std::vector<dtype> output_types() const;
  std::vector<shape> output_shapes(bool batch, int64_t batch_size = -1) const;

  /// Parses one record; `record_name` names it in errors (e.g. "record 17 of train-00001").
  status parse_single(std::string_view record, std::vector<tensor>& out,
                      std::string_view record_name = "record") const;
  /// Parses a batch; errors name the record by its index in the batch.
  status parse_batch(std::span<const std::string> records, std::vector<tensor>& out) const;
  status parse_batch(std::span<const std::string_view> records, std::vector<tensor>& out) const;

private:
  example_parser() = default;
  std::vector<feature_spec> specs_;
};

/// ParseSingleSequenceExample: context features (fixed) and per-step features whose steps are
/// `shape`-shaped. Outputs: each context feature's value, then per sequence feature its steps
/// stacked [T, shape...] and T as an int64 scalar.
status parse_single_sequence_example(std::string_view record,
                                     std::span<const feature_spec> context,
                                     std::span<const feature_spec> sequence,
                                     std::vector<tensor>& out,
                                     std::string_view record_name = "record");

// ---- graph ops (definitions in ops/defs/parsing_ops.cpp) ----
/// ParseExample over a string vector of serialized Examples; outputs per spec as above.
std::vector<output> parse_example(output serialized, const std::vector<feature_spec>& specs,
                                  std::string_view name = {});
/// ParseSingleExample over one serialized Example (a string scalar).
std::vector<output> parse_single_example(output serialized,
                                         const std::vector<feature_spec>& specs,
                                         std::string_view name = {});
/// ParseSingleSequenceExample: context values, then per sequence feature [T, ...] and T.
std::vector<output> parse_single_sequence_example(output serialized,
                                                  const std::vector<feature_spec>& context,
                                                  const std::vector<feature_spec>& sequence,
                                                  std::string_view name = {});
/// DecodeRaw: each string's bytes reinterpreted as `type` values, appended as a last dimension.
output decode_raw(output bytes, dtype type, bool little_endian = true, std::string_view name = {});

/// Registers the kernels of the parsing ops (the runtime adds them to the builtin kernels).
void register_parsing_kernels(kernel_registry& reg);

} // namespace runnel
