// Definitions of TensorFlow's TensorArrayV3 family and StackV2 family, with TensorFlow's names,
// inputs and attributes. Handles are string scalars naming a resource of the step
// (ops/kernel/step_resources.hpp); a TensorArray's `flow` is a float scalar that orders the operations
// on it as data dependencies. Kernels: ops/cpu/tensor_array.cpp; builder: ops/layers/tensor_array.hpp.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

/// Output i is the element shape attribute (`attr`), with `lead` prepended when given.
shape_function element_output(const char* attr, int out, bool stacked) {
  return [attr, out, stacked](inference_context& c) -> status {
    for (int i = 0; i < c.num_outputs(); ++i)
      c.set_output(i, shape::unknown());
    shape s = c.attr<shape>(attr);
    if (stacked) {
      int64_t lead = -1;
      if (auto* idx = c.input_constant(1); idx && idx->rank() == 1)
        lead = idx->dim(0);
      if (s.has_known_rank()) {
        std::vector<int64_t> dims{lead};
        dims.insert(dims.end(), s.dims().begin(), s.dims().end());
        s = shape(std::move(dims));
      }
    }
    c.set_output(out, s);
    return {};
  };
}

op_def flow_out(const char* name) {
  return op_def(name).output("flow_out", dtype::f32).set_stateful().shape_fn(scalar_shape);
}

} // namespace

RUNNEL_OP_FAMILY(tensor_array) {
  add(reg, op_def("TensorArrayV3")
               .input("size", dtype::i32)
               .output("handle", dtype::string)
               .output("flow", dtype::f32)
               .attr("dtype", attr_type::type)
               .attr("element_shape", attr_type::shape, shape::unknown())
               .attr("dynamic_size", attr_type::boolean, false)
               .attr("clear_after_read", attr_type::boolean, true)
               .attr("identical_element_shapes", attr_type::boolean, false)
               .attr("tensor_array_name", attr_type::string, std::string())
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, op_def("TensorArrayGradV3")
               .input("handle", dtype::string)
               .input("flow_in", dtype::f32)
               .output("grad_handle", dtype::string)
               .output("flow_out", dtype::f32)
               .attr("source", attr_type::string)
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, flow_out("TensorArrayWriteV3")
               .input("handle", dtype::string)
               .input("index", dtype::i32)
               .input("value", "T")
               .input("flow_in", dtype::f32)
               .type_attr("T"));
  add(reg, op_def("TensorArrayReadV3")
               .input("handle", dtype::string)
               .input("index", dtype::i32)
               .input("flow_in", dtype::f32)
               .output("value", "dtype")
               .type_attr("dtype")
               // Runnel: the element shape, when known, for shape inference downstream.
               .attr("element_shape", attr_type::shape, shape::unknown())
               .set_stateful()
               .shape_fn(element_output("element_shape", 0, false)));
  add(reg, op_def("TensorArrayGatherV3")
               .input("handle", dtype::string)
               .input("indices", dtype::i32)
               .input("flow_in", dtype::f32)
               .output("value", "dtype")
               .type_attr("dtype")
               .attr("element_shape", attr_type::shape, shape::unknown())
               .set_stateful()
               .shape_fn(element_output("element_shape", 0, true)));
  add(reg, flow_out("TensorArrayScatterV3")
               .input("handle", dtype::string)
               .input("indices", dtype::i32)
               .input("value", "T")
               .input("flow_in", dtype::f32)
               .type_attr("T"));
  add(reg, op_def("TensorArrayConcatV3")
               .input("handle", dtype::string)
               .input("flow_in", dtype::f32)
               .output("value", "dtype")
               .output("lengths", dtype::i64)
               .type_attr("dtype")
               .attr("element_shape_except0", attr_type::shape, shape::unknown())
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 shape s = c.attr<shape>("element_shape_except0");
                 if (s.has_known_rank()) {
                   std::vector<int64_t> dims{-1};
                   dims.insert(dims.end(), s.dims().begin(), s.dims().end());
                   s = shape(std::move(dims));
                 }
                 c.set_output(0, s);
                 c.set_output(1, shape{-1});
                 return {};
               }));
  add(reg, flow_out("TensorArraySplitV3")
               .input("handle", dtype::string)
               .input("value", "T")
               .input("lengths", dtype::i64)
               .input("flow_in", dtype::f32)
               .type_attr("T"));
  add(reg, op_def("TensorArraySizeV3")
               .input("handle", dtype::string)
               .input("flow_in", dtype::f32)
               .output("size", dtype::i32)
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, op_def("TensorArrayCloseV3").input("handle", dtype::string).set_stateful());

  add(reg, op_def("StackV2")
               .input("max_size", dtype::i32)
               .output("handle", dtype::string)
               .attr("elem_type", attr_type::type)
               .attr("stack_name", attr_type::string, std::string())
               .set_stateful()
               .shape_fn(scalar_shape));
  add(reg, op_def("StackPushV2")
               .input("handle", dtype::string)
               .input("elem", "T")
               .output("output", "T")
               .type_attr("T")
               .attr("swap_memory", attr_type::boolean, false)
               .set_stateful()
               .shape_fn([](inference_context& c) -> status {
                 c.set_output(0, c.input_shape(1));
                 return {};
               }));
  add(reg, op_def("StackPopV2")
               .input("handle", dtype::string)
               .output("elem", "elem_type")
               .type_attr("elem_type")
               .set_stateful()
               .shape_fn(unknown_shape));
  add(reg, op_def("StackCloseV2").input("handle", dtype::string).set_stateful());
}

} // namespace runnel
