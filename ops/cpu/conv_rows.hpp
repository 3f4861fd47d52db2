#pragma once
// Convolutions whose window spans the whole width of a VALID, stride-1-in-height input, like the
// text CNN's windows over whole word vectors ([batch, words, dim, 1] * [k, dim, 1, maps]): each
// window is a run of whole input rows, contiguous in memory, so no patch matrix is needed. With
// X the input as rows [n*h, w*c] and W_i tap i's filter rows [w*c, o]:
//   Y[r] = sum_i X[r+i] · W_i     (one GEMM per tap over every row of the batch at once)
// keeping rows r = b*h + y with y < oh; the backprops are the same products transposed. The
// rows past an image's last window are computed and dropped (kh-1 of every h).
#include "runnel/ops/cpu/conv_dnnl.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"

namespace runnel {

/// Whether `s` is such a convolution.
bool conv_is_row_product(const conv_shape& s);
/// Output [n, oh, 1, o] of input [n, h, w, c] and filter [kh, w, c, o].
void conv_rows_forward(cpu_device* pool, const conv_shape& s, const float* input,
                       const float* filter, float* output);
/// The input's gradient [n, h, w, c] from dy [n, oh, 1, o].
void conv_rows_backward_input(cpu_device* pool, const conv_shape& s, const float* dy,
                              const float* filter, float* dx);
/// The filter's gradient [kh, w, c, o].
void conv_rows_backward_filter(cpu_device* pool, const conv_shape& s, const float* input,
                               const float* dy, float* dfilter);

} // namespace runnel
