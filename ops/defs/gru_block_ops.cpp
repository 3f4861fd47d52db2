// GRUBlockCell: TensorFlow's fused GRU step (what tf.contrib.rnn.GRUBlockCellV2 runs), for graphs
// imported from TensorFlow. With xh = [x, h_prev]:
//   [r, u] = sigmoid(xh · w_ru + b_ru)        (r and u each [batch, cell])
//   c = tanh([x, r ∘ h_prev] · w_c + b_c)
//   h = u ∘ h_prev + (1 − u) ∘ c
// Outputs r, u, c and h, each [batch, cell]; float32.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {

RUNNEL_OP_FAMILY(gru_block) {
  throw_if_error(
      reg.add(op_def("GRUBlockCell")
                  .input("x", "T")
                  .input("h_prev", "T")
                  .input("w_ru", "T")
                  .input("w_c", "T")
                  .input("b_ru", "T")
                  .input("b_c", "T")
                  .output("r", "T")
                  .output("u", "T")
                  .output("c", "T")
                  .output("h", "T")
                  .type_attr("T", {dtype::f32})
                  .shape_fn([](inference_context& c) -> status {
                    for (int i : {0, 1, 2, 3})
                      RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 2));
                    for (int i : {4, 5})
                      RUNNEL_RETURN_IF_ERROR(c.require_rank(i, 1));
                    auto dim = [&](int i, int d) {
                      auto& s = c.input_shape(i);
                      return s.has_known_rank() ? s[d] : int64_t(-1);
                    };
                    int64_t batch = dim(0, 0) >= 0 ? dim(0, 0) : dim(1, 0);
                    int64_t cell = dim(1, 1) >= 0 ? dim(1, 1) : dim(5, 0);
                    if (cell >= 0 && dim(2, 1) >= 0 && dim(2, 1) != 2 * cell)
                      return c.input_error(2, "must have 2 x " + std::to_string(cell) + " columns");
                    if (cell >= 0 && dim(3, 1) >= 0 && dim(3, 1) != cell)
                      return c.input_error(3, "must have " + std::to_string(cell) + " columns");
                    for (int o = 0; o < 4; ++o)
                      c.set_output(o, shape{batch, cell});
                    return {};
                  })));
}

} // namespace runnel
