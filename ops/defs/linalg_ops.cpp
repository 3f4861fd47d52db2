// Linear-algebra op definitions: MatrixInverse, MatrixDeterminant.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(linalg) {
  auto square_matrices = [](inference_context& c) -> status {
    auto& s = c.input_shape(0);
    RUNNEL_RETURN_IF_ERROR(c.require_rank_at_least(0, 2));
    if (s.has_known_rank() && s[s.rank() - 1] >= 0 && s[s.rank() - 2] >= 0 &&
        s[s.rank() - 1] != s[s.rank() - 2])
      return c.input_error(0, "must be square matrices, got shape " + s.to_string());
    return {};
  };
  add(reg, op_def("MatrixInverse")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", wide_real_types)
               .attr("adjoint", attr_type::boolean, false)
               .shape_fn([square_matrices](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(square_matrices(c));
                 c.set_output(0, c.input_shape(0));
                 return {};
               }));
  add(reg, op_def("MatrixDeterminant")
               .input("input", "T")
               .output("output", "T")
               .type_attr("T", wide_real_types)
               .shape_fn([square_matrices](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(square_matrices(c));
                 auto& s = c.input_shape(0);
                 if (s.has_known_rank())
                   c.set_output(0,
                                shape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 2)));
                 return {};
               }));
}

} // namespace runnel
