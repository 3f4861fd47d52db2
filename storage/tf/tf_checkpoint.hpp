#pragma once
// TensorFlow's V2 checkpoints (what tf.train.Saver writes since TensorFlow 1.0): a prefix such
// as `train/model.ckpt-1000` names `model.ckpt-1000.index`, a table (storage/tf/sstable.hpp) of
// BundleEntryProto by tensor name, and the data shards `model.ckpt-1000.data-00000-of-00001`
// holding the tensors' bytes, each entry with its masked CRC32C.
//
//   if (is_tf_checkpoint(path)) {
//     auto names = list_tf_checkpoint(path);                  // names, dtypes, shapes
//     auto values = read_tf_checkpoint(path, {"dense/kernel"}); // {} reads every tensor
//   }
//   throw_if_error(write_tf_checkpoint("out/model.ckpt-5", tensors));  // TensorFlow reads it
//
// Every checksum is checked; a corrupt table, a missing shard or a tensor whose bytes disagree
// with its entry is a data_loss naming the file and byte offset. Partitioned variables (an entry
// made of slices, each slice an entry of its own: storage/tf/tensor_slice.hpp) are read whole.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/core/tensor.hpp"
#include "runnel/storage/checkpoint.hpp"

namespace runnel {

/// Whether `path` is a TensorFlow checkpoint: a prefix with `path.index` beside it, or the
/// `.index` file itself.
bool is_tf_checkpoint(const std::string& path);
/// The prefix of `path` (without a trailing `.index`).
std::string tf_checkpoint_prefix(const std::string& path);

/// Every tensor's name, dtype and shape (types Runnel lacks listed with `unsupported` set).
result<std::vector<checkpoint_entry>> list_tf_checkpoint(const std::string& path);
/// The same from an `.index` file's bytes (`what` names it in errors); for the fuzz target.
result<std::vector<checkpoint_entry>> parse_tf_checkpoint_index(std::string_view bytes,
                                                                const std::string& what);
/// The named tensors (all when `names` is empty); a missing name is not_found listing a few
/// that exist.
result<std::map<std::string, tensor>> read_tf_checkpoint(const std::string& path,
                                                         const std::vector<std::string>& names);
/// Either format, told by the path: a TensorFlow prefix (is_tf_checkpoint) or an HDF5 file
/// (storage/checkpoint.hpp). The saver and `runnel ckpt` go through these.
result<std::vector<checkpoint_entry>> list_any_checkpoint(const std::string& path);
/// The named tensors (all when `names` is empty).
result<std::map<std::string, tensor>> read_any_checkpoint(const std::string& path,
                                                          const std::vector<std::string>& names);
/// Reads every tensor, checksums included, and drops the values; an HDF5 file is read in a
/// child process (verify_checkpoint_isolated).
status verify_any_checkpoint(const std::string& path);

/// Writes `prefix.index` and one data shard, as TensorFlow's BundleWriter does; each file is
/// written beside its target and renamed, the data before the index.
status write_tf_checkpoint(const std::string& prefix, const std::map<std::string, tensor>& tensors);

} // namespace runnel
