#pragma once
// TensorFlow's StridedSlice semantics, shared by shape inference and the kernels.
//
//   x[1:-1:2, ..., tf.newaxis, 3]  ==  begin [1, 0, 0, 3], end [-1, 0, 0, 4], strides [2, 1, 1, 1],
//   ellipsis_mask 0b10, new_axis_mask 0b100, shrink_axis_mask 0b1000
//
// The sparse spec (begin/end/strides/masks) is expanded against the input's rank into, per input
// dimension, a start, a stride and a count; the output shape adds new axes and drops shrunk
// ones.

#include <cstdint>
#include <vector>

#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/status.hpp"

namespace runnel {

struct strided_slice_masks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink_axis = 0;
};

struct strided_slice_plan {
  std::vector<int64_t> start, stride, count; ///< per input dimension
  std::vector<int64_t> output_dims;          ///< the op's output shape
};

/// Expands the spec against `input` (dims may be -1 during inference: counts become -1 there).
result<strided_slice_plan> plan_strided_slice(const shape& input, const std::vector<int64_t>& begin,
                                              const std::vector<int64_t>& end,
                                              const std::vector<int64_t>& strides,
                                              const strided_slice_masks& masks);

} // namespace runnel
