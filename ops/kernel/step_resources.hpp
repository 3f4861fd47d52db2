#pragma once
// Resources that live for one step: TensorArrays and Stacks (TensorFlow's per-step container).
// A TensorArrayV3 or StackV2 node creates one each time it runs (once per step, or once per
// iteration inside a loop) under a fresh handle; the ops that use it take that handle (a string
// scalar) as their first input. The step owns them: they go when the step ends, whatever its
// outcome. Kernels reach the container through kernel_context::step_container().

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {

/// A list of tensors of one dtype, written and read by index (TensorFlow's TensorArray).
/// Thread-safe: nodes of one step may use it at once.
class tensor_array_resource {
public:
  struct options {
    dtype type = dtype::f32;
    shape element_shape = shape::unknown();
    bool dynamic_size = false;
    bool clear_after_read = true;
    /// Writes to the same index add up (gradient arrays) instead of being an error.
    bool multiple_writes_aggregate = false;
    bool identical_element_shapes = false;
  };
  tensor_array_resource(std::string name, int64_t size, options opts);

  const std::string& name() const { return name_; }
  dtype type() const { return opts_.type; }
  status write(int64_t index, tensor value);
  result<tensor> read(int64_t index);
  /// Element `indices[k]` as row k of one tensor (all elements must have one shape).
  result<tensor> gather(std::span<const int32_t> indices, const shape& element_shape);
  /// Row k of `value` to index `indices[k]`.
  status scatter(std::span<const int32_t> indices, const tensor& value);
  /// Every element joined along dimension 0, with each element's length.
  result<std::pair<tensor, tensor>> concat(const shape& element_shape_except0);
  /// `value` cut along dimension 0 into pieces of `lengths`, one per index.
  status split(const tensor& value, std::span<const int64_t> lengths);
  int64_t size();
  void close();
  /// The gradient array for `source` (one per gradients() call): same size and dtype, created
  /// on first use, writes aggregating.
  std::shared_ptr<tensor_array_resource> grad(const std::string& source);

private:
  status check_index(int64_t index, const char* what) const;
  result<tensor> element(int64_t index, const shape& fallback);

  std::mutex mu_;
  std::string name_;
  options opts_;
  std::vector<tensor> elems_;
  std::vector<char> written_, cleared_;
  /// The shape of each element written (kept when a read clears it).
  std::vector<shape> written_shapes_;
  /// A gradient array's: the forward array's element shapes, the zeros an index never written
  /// here stands for (elements may differ in shape: a split into unequal lengths).
  std::vector<shape> zero_shapes_;
  bool closed_ = false;
  std::map<std::string, std::shared_ptr<tensor_array_resource>> grads_;
};

/// A last-in first-out stack of tensors (TensorFlow's StackV2).
class stack_resource {
public:
  stack_resource(std::string name, dtype type, int64_t max_size)
      : name_(std::move(name)), type_(type), max_size_(max_size) {}
  status push(tensor value);
  result<tensor> pop();
  void close();

private:
  std::mutex mu_;
  std::string name_;
  dtype type_;
  int64_t max_size_;
  std::vector<tensor> elems_;
  bool closed_ = false;
};

/// The TensorArrays and Stacks of one step, by handle.
class step_resources {
public:
  step_resources() = default;
  step_resources(const step_resources&) = delete;
  step_resources& operator=(const step_resources&) = delete;
  ~step_resources();

  /// A new handle for a resource made by node `node` (unique within the step).
  std::string new_handle(const std::string& node);
  void add_array(const std::string& handle, std::shared_ptr<tensor_array_resource> ta);
  result<std::shared_ptr<tensor_array_resource>> array(const std::string& handle);
  void add_stack(const std::string& handle, std::shared_ptr<stack_resource> s);
  result<std::shared_ptr<stack_resource>> stack(const std::string& handle);

  /// Resources alive in all steps of the process (a test checks that steps leave none).
  static int64_t live();

private:
  std::mutex mu_;
  int64_t next_ = 0;
  std::unordered_map<std::string, std::shared_ptr<tensor_array_resource>> arrays_;
  std::unordered_map<std::string, std::shared_ptr<stack_resource>> stacks_;
};

} // namespace runnel
