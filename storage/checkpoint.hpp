#pragma once
// Checkpoint files in HDF5: one dataset per variable, named by the variable's name with ":0"
// appended, as TensorFlow names a variable's tensor (slashes become groups, so `hidden/w` is
// dataset `w:0` in group `hidden`, and its Adam slot `hidden/w/Adam` is `Adam:0` in group
// `hidden/w`); root attributes `global_step` (int64) and `format_version` (int32). Readable by
// h5dump and h5py. The API speaks variable names; the ":0" is the file's business.
//
//   throw_if_error(write_checkpoint("ckpt/model-1000.h5", {{"w", w_value}}, 1000));
//   auto c = read_checkpoint("ckpt/model-1000.h5");          // all variables, global step
//   auto info = list_checkpoint("ckpt/model-1000.h5");       // names, dtypes, shapes only
//
// Writes are atomic: the file is written beside the target, flushed, fsynced and renamed, so a
// crash mid-save never leaves a half-written file under the checkpoint's name. Datasets store
// numbers natively; float16/bfloat16 are stored as uint16 bit patterns and bool as uint8, with
// a `dtype` attribute on every dataset naming the Runnel dtype. Any HDF5 file can be read: a
// dataset without that attribute is mapped from its HDF5 type (as Keras files are).

#include <cstdint>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {

inline constexpr int32_t checkpoint_format_version = 1;

struct checkpoint_entry {
  std::string name; ///< dataset path without the leading '/', e.g. "hidden/w"
  dtype type;       ///< invalid when Runnel cannot read the dataset's type
  shape dims;
  std::string unsupported; ///< why the type cannot be read (empty when it can)
};

struct checkpoint_contents {
  std::map<std::string, tensor> tensors;
  std::optional<int64_t> global_step;
  int32_t format_version = 0; ///< 0 for files not written by Runnel
};

status write_checkpoint(const std::string& path, const std::map<std::string, tensor>& tensors,
                        std::optional<int64_t> global_step);
result<checkpoint_contents> read_checkpoint(const std::string& path);
/// Names, dtypes and shapes of every dataset, without reading the data. Datasets of types Runnel
/// cannot read are listed with `unsupported` saying why.
result<std::vector<checkpoint_entry>> list_checkpoint(const std::string& path);
/// Reads the datasets named in `names` only; a missing one is not_found naming it and the file.
result<std::map<std::string, tensor>>
read_checkpoint_tensors(const std::string& path, const std::vector<std::string>& names);

/// Reads every dataset of a checkpoint and drops the values: ok when the file is whole.
status verify_checkpoint(const std::string& path);
/// `verify_checkpoint` in a child process, so that a crash inside libhdf5 on a damaged file (it
/// has memory errors of its own on some corrupt inputs; docs/reliability.md) or a hang past
/// `timeout` is an error naming the file, not the end of the caller. The child is this program
/// executed again (/proc/self/exe), which verifies the file before its main runs: a child of
/// fork() without exec inherits the parent's threads' locks half-taken and could hang.
status verify_checkpoint_isolated(const std::string& path,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// The `global_step` attribute of a checkpoint (nullopt when it has none).
result<std::optional<int64_t>> read_checkpoint_global_step(const std::string& path);

/// A string attribute of an HDF5 file's root group (Keras keeps its model's JSON in
/// `model_config`); nullopt when the file has none of that name.
result<std::optional<std::string>> read_root_string_attribute(const std::string& path,
                                                              const std::string& key);

/// The `checkpoint` state file of a directory: the latest checkpoint and all that are kept
/// (file names relative to the directory), in TensorFlow's text format:
///   model_checkpoint_path: "model-1000.h5"
///   all_model_checkpoint_paths: "model-500.h5"
struct checkpoint_state {
  std::string latest;
  std::vector<std::string> all;
};
result<checkpoint_state> read_checkpoint_state(const std::string& dir);
/// Writes `dir/checkpoint` atomically.
status write_checkpoint_state(const std::string& dir, const checkpoint_state& state);

} // namespace runnel
