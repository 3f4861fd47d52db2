// Definitions of the ops behind embeddings, with TensorFlow's names, inputs and attributes:
// ScatterAdd/ScatterSub/ScatterUpdate, DynamicPartition and DynamicStitch, and Runnel's own
// CheckIndices (an embedding lookup's id range check). The SparseApply* updates are training ops
// (ops/defs/training_ops.cpp), as in TensorFlow. Kernels: ops/cpu/sparse.cpp; builders:
// ops/layers/embedding.hpp.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

op_def scatter(const char* name) {
  return op_def(name)
      .input("ref", "T", true)
      .input("indices", "Tindices")
      .input("updates", "T")
      .output("output_ref", "T")
      .type_attr("T", wide_number_types)
      .type_attr("Tindices", index_types)
      .attr("use_locking", attr_type::boolean, true)
      .set_stateful()
      .shape_fn([](inference_context& c) -> status {
        RUNNEL_RETURN_IF_ERROR(check_updates_shape(c, 0, 1, 2));
        c.set_output(0, c.input_shape(0));
        return {};
      });
}

} // namespace

RUNNEL_OP_FAMILY(sparse) {
  add(reg, scatter("ScatterAdd"));
  add(reg, scatter("ScatterSub"));
  add(reg, scatter("ScatterUpdate"));
  add(reg, op_def("DynamicPartition")
               .input("data", "T")
               .input("partitions", dtype::i32)
               .output_list("outputs", "T", "num_partitions")
               .type_attr("T")
               .attr("num_partitions", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 auto& data = c.input_shape(0);
                 auto& parts = c.input_shape(1);
                 if (c.attr<int64_t>("num_partitions") < 1)
                   return invalid_argument("num_partitions must be at least 1");
                 if (!data.has_known_rank() || !parts.has_known_rank())
                   return {};
                 if (parts.rank() > data.rank() ||
                     !shape(std::vector<int64_t>(data.dims().begin(),
                                                 data.dims().begin() + parts.rank()))
                          .is_compatible_with(parts))
                   return c.input_error(1, "has shape " + parts.to_string() +
                                               ", which must be a prefix of the data's " +
                                               data.to_string());
                 std::vector<int64_t> dims{-1};
                 dims.insert(dims.end(), data.dims().begin() + parts.rank(), data.dims().end());
                 for (int o = 0; o < c.num_outputs(); ++o)
                   c.set_output(o, shape(dims));
                 return {};
               }));
  add(reg, op_def("DynamicStitch")
               .input_list("indices", dtype::i32, "N")
               .input_list("data", "T", "N")
               .output("merged", "T")
               .type_attr("T")
               .attr("N", attr_type::integer)
               .shape_fn([](inference_context& c) -> status {
                 int n = c.num_inputs() / 2;
                 // merged is [max index + 1] + data[i].shape[indices[i].rank:]
                 for (int i = 0; i < n; ++i) {
                   auto& idx = c.input_shape(i);
                   auto& data = c.input_shape(n + i);
                   if (!idx.has_known_rank() || !data.has_known_rank())
                     continue;
                   if (idx.rank() > data.rank())
                     return c.input_error(n + i, "has shape " + data.to_string() +
                                                     " but its indices have " + idx.to_string());
                   std::vector<int64_t> dims{-1};
                   dims.insert(dims.end(), data.dims().begin() + idx.rank(), data.dims().end());
                   c.set_output(0, shape(dims));
                   return {};
                 }
                 return {};
               }));
  add(reg, op_def("CheckIndices")
               .input("indices", "Tindices")
               .output("output", "Tindices")
               .type_attr("Tindices", index_types)
               .attr("limit", attr_type::integer)
               .attr("what", attr_type::string, std::string("indices"))
               .shape_fn(same_shape_as_input(0)));
}

} // namespace runnel
