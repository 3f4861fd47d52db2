// Definitions of the ops behind embeddings and sparse updates, with TensorFlow's names, inputs
// and attributes: ScatterAdd/ScatterSub/ScatterUpdate, the SparseApply* optimizer updates,
// DynamicPartition and DynamicStitch. Three are Runnel's own: SparseApplyGradientDescent and
// SparseApplyAdam (gradient descent's and lazy Adam's updates of the rows seen, which TensorFlow
// builds from scatter ops in Python; one kernel each saves a pass over the rows) and CheckIndices
// (an embedding lookup's id range check). Kernels: ops/cpu/sparse.cpp and ops/cpu/training.cpp;
// builders: ops/layers/embedding.hpp.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

const std::vector<dtype> real_types{dtype::f32, dtype::f64};
const std::vector<dtype> number_types{dtype::f32, dtype::f64, dtype::i32, dtype::i64};
const std::vector<dtype> index_types{dtype::i32, dtype::i64};

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// updates must be indices.shape + var.shape[1:].
status check_updates_shape(inference_context& c, int var, int indices, int updates) {
  auto& v = c.input_shape(var);
  auto& idx = c.input_shape(indices);
  auto& u = c.input_shape(updates);
  if (!v.has_known_rank() || !idx.has_known_rank() || !u.has_known_rank())
    return {};
  if (v.rank() < 1)
    return c.input_error(var, "must have rank at least 1, got shape " + v.to_string());
  std::vector<int64_t> want(idx.dims());
  want.insert(want.end(), v.dims().begin() + 1, v.dims().end());
  if (!shape(want).is_compatible_with(u))
    return c.input_error(updates, "has shape " + u.to_string() + " but indices " +
                                      idx.to_string() + " and a variable of shape " +
                                      v.to_string() + " need " + shape(want).to_string());
  return {};
}

op_def scatter(const char* name) {
  return op_def(name)
      .input("ref", "T", true)
      .input("indices", "Tindices")
      .input("updates", "T")
      .output("output_ref", "T")
      .type_attr("T", number_types)
      .type_attr("Tindices", index_types)
      .attr("use_locking", attr_type::boolean, true)
      .set_stateful()
      .shape_fn([](inference_context& c) -> status {
        RUNNEL_RETURN_IF_ERROR(check_updates_shape(c, 0, 1, 2));
        c.set_output(0, c.input_shape(0));
        return {};
      });
}

/// A SparseApply* op: refs first (the variable, then its slots), then `scalars` before the
/// gradient, the gradient, the indices, then `after` scalars.
op_def sparse_apply(const char* name, std::vector<const char*> slots,
                    std::vector<const char*> scalars, std::vector<const char*> after = {}) {
  op_def d(name);
  d.input("var", "T", true);
  for (auto* s : slots)
    d.input(s, "T", true);
  for (auto* s : scalars)
    d.input(s, "T");
  d.input("grad", "T").input("indices", "Tindices");
  for (auto* s : after)
    d.input(s, "T");
  int grad = int(1 + slots.size() + scalars.size());
  int nslots = int(slots.size());
  return d.output("out", "T")
      .type_attr("T", real_types)
      .type_attr("Tindices", index_types)
      .attr("use_locking", attr_type::boolean, false)
      .set_stateful()
      .shape_fn([grad, nslots](inference_context& c) -> status {
        for (int i = 1; i <= nslots; ++i)
          if (!c.input_shape(0).is_compatible_with(c.input_shape(i)))
            return c.input_error(i, "(a slot) has shape " + c.input_shape(i).to_string() +
                                        " but the variable has " + c.input_shape(0).to_string());
        RUNNEL_RETURN_IF_ERROR(c.require_rank(grad + 1, 1));
        RUNNEL_RETURN_IF_ERROR(check_updates_shape(c, 0, grad + 1, grad));
        c.set_output(0, c.input_shape(0));
        return {};
      });
}

} // namespace

RUNNEL_OP_FAMILY(sparse) {
  add(reg, scatter("ScatterAdd"));
  add(reg, scatter("ScatterSub"));
  add(reg, scatter("ScatterUpdate"));
  add(reg, sparse_apply("SparseApplyGradientDescent", {}, {"alpha"}));
  add(reg, sparse_apply("SparseApplyMomentum", {"accum"}, {"lr"}, {"momentum"})
               .attr("use_nesterov", attr_type::boolean, false));
  add(reg, sparse_apply("SparseApplyAdagrad", {"accum"}, {"lr"})
               .attr("update_slots", attr_type::boolean, true));
  add(reg, sparse_apply("SparseApplyRMSProp", {"ms", "mom"}, {"lr", "rho", "momentum", "epsilon"}));
  add(reg, sparse_apply("SparseApplyAdam", {"m", "v"},
                        {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"})
               .attr("use_nesterov", attr_type::boolean, false));
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
