// Training op definitions: the optimizers' Apply* updates, dense and sparse (SparseApply*).
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

namespace {

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
      .type_attr("T", wide_real_types)
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

RUNNEL_OP_FAMILY(training) {
  auto apply_shape = [](int grad_input) {
    return [grad_input](inference_context& c) -> status {
      if (!c.input_shape(0).is_compatible_with(c.input_shape(grad_input)))
        return invalid_argument("the variable has shape " + c.input_shape(0).to_string() +
                                " but the gradient has shape " +
                                c.input_shape(grad_input).to_string());
      for (int i = 1; i < c.num_inputs(); ++i) {
        bool is_ref = c.def().inputs[size_t(i)].is_ref;
        if (i == grad_input)
          continue;
        if (is_ref) {
          if (!c.input_shape(0).is_compatible_with(c.input_shape(i)))
            return c.input_error(i, "(a slot) has shape " + c.input_shape(i).to_string() +
                                        " but the variable has " + c.input_shape(0).to_string());
        } else if (c.input_shape(i).has_known_rank() && c.input_shape(i).rank() != 0) {
          return c.input_error(i, "must be a scalar, got shape " + c.input_shape(i).to_string());
        }
      }
      c.set_output(0, c.input_shape(0));
      return {};
    };
  };
  auto apply = [](const char* name) {
    return op_def(name).output("out", "T").type_attr("T", wide_real_types).set_stateful();
  };
  add(reg, apply("ApplyGradientDescent")
               .input("var", "T", true)
               .input("alpha", "T")
               .input("delta", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(2)));
  add(reg, apply("ApplyMomentum")
               .input("var", "T", true)
               .input("accum", "T", true)
               .input("lr", "T")
               .input("grad", "T")
               .input("momentum", "T")
               .attr("use_locking", attr_type::boolean, false)
               .attr("use_nesterov", attr_type::boolean, false)
               .shape_fn(apply_shape(3)));
  add(reg, apply("ApplyAdagrad")
               .input("var", "T", true)
               .input("accum", "T", true)
               .input("lr", "T")
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(3)));
  add(reg, apply("ApplyRMSProp")
               .input("var", "T", true)
               .input("ms", "T", true)
               .input("mom", "T", true)
               .input("lr", "T")
               .input("rho", "T")
               .input("momentum", "T")
               .input("epsilon", "T")
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .shape_fn(apply_shape(7)));
  // Adam's six scalars, shared by ApplyAdam and _MultiApplyAdam.
  auto adam_scalars = [](op_def& d) -> op_def& {
    for (const char* s : {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"})
      d.input(s, "T");
    return d;
  };
  add(reg, adam_scalars(apply("ApplyAdam")
                            .input("var", "T", true)
                            .input("m", "T", true)
                            .input("v", "T", true))
               .input("grad", "T")
               .attr("use_locking", attr_type::boolean, false)
               .attr("use_nesterov", attr_type::boolean, false)
               .shape_fn(apply_shape(9)));
  // ApplyAdam over N variables of one GPU that share their scalars, in one launch: made by the
  // graph optimizer's multi-tensor pass (ops/optimize/multi_tensor.cpp), not by users.
  op_def multi_adam("_MultiApplyAdam");
  adam_scalars(multi_adam.input_list("var", "T", "N")
                   .input_list("m", "T", "N")
                   .input_list("v", "T", "N"))
      .input_list("grad", "T", "N")
      .type_attr("T", wide_real_types)
      .attr("N", attr_type::integer)
      .attr("use_locking", attr_type::boolean, false)
      .attr("use_nesterov", attr_type::boolean, false)
      .set_stateful()
      .shape_fn([](inference_context& c) -> status {
        int64_t n = c.attr<int64_t>("N");
        if (n < 1 || c.num_inputs() != 4 * n + 6)
          return invalid_argument("_MultiApplyAdam needs N >= 1 variables, each with m, v and a "
                                  "gradient, and 6 scalars");
        for (int64_t k = 0; k < n; ++k)
          for (int64_t of : {n, 2 * n, 3 * n + 6})
            if (!c.input_shape(int(k)).is_compatible_with(c.input_shape(int(of + k))))
              return c.input_error(int(of + k), "has shape " +
                                                    c.input_shape(int(of + k)).to_string() +
                                                    " but its variable has " +
                                                    c.input_shape(int(k)).to_string());
        return {};
      });
  for (int i = 0; i < 3; ++i)
    multi_adam.inputs[size_t(i)].is_ref = true;
  add(reg, std::move(multi_adam));
  // The sparse updates: only the rows in `indices`. SparseApplyGradientDescent and
  // SparseApplyAdam are Runnel's own (gradient descent's and lazy Adam's updates of the rows
  // seen, which TensorFlow builds from scatter ops in Python; one kernel each saves a pass over
  // the rows).
  add(reg, sparse_apply("SparseApplyGradientDescent", {}, {"alpha"}));
  add(reg, sparse_apply("SparseApplyMomentum", {"accum"}, {"lr"}, {"momentum"})
               .attr("use_nesterov", attr_type::boolean, false));
  add(reg, sparse_apply("SparseApplyAdagrad", {"accum"}, {"lr"})
               .attr("update_slots", attr_type::boolean, true));
  add(reg, sparse_apply("SparseApplyRMSProp", {"ms", "mom"}, {"lr", "rho", "momentum", "epsilon"}));
  add(reg, sparse_apply("SparseApplyAdam", {"m", "v"},
                        {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"})
               .attr("use_nesterov", attr_type::boolean, false));
}

} // namespace runnel
