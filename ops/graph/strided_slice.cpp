#include "runnel/ops/graph/strided_slice.hpp"

#include <algorithm>

namespace runnel {

result<strided_slice_plan> plan_strided_slice(const shape& input, const std::vector<int64_t>& begin,
                                              const std::vector<int64_t>& end,
                                              const std::vector<int64_t>& strides,
                                              const strided_slice_masks& m) {
  size_t n = begin.size();
  if (end.size() != n || strides.size() != n)
    return invalid_argument("begin, end and strides must have the same length, got " +
                            std::to_string(begin.size()) + ", " + std::to_string(end.size()) +
                            " and " + std::to_string(strides.size()));
  if (!input.has_known_rank())
    return invalid_argument("the input's rank must be known");
  int rank = input.rank();
  int ellipses = 0;
  int consumed = 0; // sparse entries that consume an input dimension (not newaxis/ellipsis)
  for (size_t i = 0; i < n; ++i) {
    if (m.ellipsis >> i & 1)
      ++ellipses;
    else if (!(m.new_axis >> i & 1))
      ++consumed;
  }
  if (ellipses > 1)
    return invalid_argument("at most one ellipsis is allowed");
  if (consumed > rank)
    return invalid_argument("the slice indexes " + std::to_string(consumed) +
                            " dimensions of an input of rank " + std::to_string(rank));
  strided_slice_plan plan;
  int d = 0; // input dimension
  auto full = [&](int dim) {
    plan.start.push_back(0);
    plan.stride.push_back(1);
    plan.count.push_back(input[dim]);
    plan.output_dims.push_back(input[dim]);
  };
  for (size_t i = 0; i < n; ++i) {
    if (m.ellipsis >> i & 1) {
      int cover = rank - consumed; // dimensions the ellipsis stands for
      for (int k = 0; k < cover; ++k)
        full(d++);
      continue;
    }
    if (m.new_axis >> i & 1) {
      plan.output_dims.push_back(1);
      continue;
    }
    int64_t dim = input[d];
    int64_t s = strides[i];
    if (s == 0)
      return invalid_argument("strides[" + std::to_string(i) + "] must not be zero");
    bool shrink = m.shrink_axis >> i & 1;
    if (shrink) {
      int64_t idx = begin[i];
      if (dim >= 0) {
        if (idx < 0)
          idx += dim;
        if (idx < 0 || idx >= dim)
          return invalid_argument("index " + std::to_string(begin[i]) + " is out of range for " +
                                  "dimension " + std::to_string(d) + " of size " +
                                  std::to_string(dim));
      }
      plan.start.push_back(idx);
      plan.stride.push_back(1);
      plan.count.push_back(1);
      ++d;
      continue;
    }
    if (dim < 0) { // unknown during inference
      plan.start.push_back(0);
      plan.stride.push_back(s);
      plan.count.push_back(-1);
      plan.output_dims.push_back(-1);
      ++d;
      continue;
    }
    auto clamp = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return s > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
    };
    int64_t b = (m.begin >> i & 1) ? (s > 0 ? 0 : dim - 1) : clamp(begin[i]);
    int64_t e = (m.end >> i & 1) ? (s > 0 ? dim : -1) : clamp(end[i]);
    int64_t count =
        s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
    plan.start.push_back(b);
    plan.stride.push_back(s);
    plan.count.push_back(count);
    plan.output_dims.push_back(count);
    ++d;
  }
  while (d < rank) // unmentioned trailing dimensions are taken whole
    full(d++);
  return plan;
}

} // namespace runnel
