// State op definitions: VariableV2 and the Assign family.
#include "runnel/ops/defs/op_util.hpp"

namespace runnel {

using namespace op_defs;

RUNNEL_OP_FAMILY(state) {
  add(reg, op_def("VariableV2")
               .output("ref", "dtype")
               .attr("shape", attr_type::shape)
               .type_attr("dtype", castable_types)
               .attr("container", attr_type::string, std::string())
               .attr("shared_name", attr_type::string, std::string())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.attr<shape>("shape"));
                 return {};
               }));
  auto assign_shape = [](inference_context& c) -> status {
    bool validate = c.attrs().count("validate_shape") ? c.attr<bool>("validate_shape") : true;
    if (validate && !c.input_shape(0).is_compatible_with(c.input_shape(1)))
      return invalid_argument("the variable has shape " + c.input_shape(0).to_string() +
                              " but the value has shape " + c.input_shape(1).to_string());
    c.set_output(0, validate ? c.input_shape(0) : c.input_shape(1));
    return {};
  };
  add(reg, op_def("Assign")
               .input("ref", "T", /*is_ref=*/true)
               .input("value", "T")
               .output("output_ref", "T")
               .type_attr("T", castable_types)
               .attr("validate_shape", attr_type::boolean, true)
               .attr("use_locking", attr_type::boolean, true)
               .set_stateful()
               .shape_fn(assign_shape));
  for (auto n : {"AssignAdd", "AssignSub"})
    add(reg, op_def(n)
                 .input("ref", "T", /*is_ref=*/true)
                 .input("value", "T")
                 .output("output_ref", "T")
                 .type_attr("T", wide_number_types)
                 .attr("use_locking", attr_type::boolean, false)
                 .set_stateful()
                 .shape_fn(assign_shape));
}

} // namespace runnel
