// Definitions of the parsing ops: ParseExample, ParseSingleExample, ParseSingleSequenceExample and
// DecodeRaw. Their kernels live in storage/ (storage/parsing_kernels.cpp), next to the Example
// codec; builders are in storage/example_parse.hpp.
//
// Runnel's ParseExample describes its features with attributes (keys, types, layouts, shapes) and
// takes defaults as inputs, one per fixed feature that has one (`has_default`). Outputs, per
// feature: fixed → values; padded (1) → values, lengths; sparse (2) → indices, values, shape.
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

void add(op_registry& reg, op_def def) {
  throw_if_error(reg.add(std::move(def)));
}

shape prepend(int64_t d, const shape& s) {
  std::vector<int64_t> dims{d};
  dims.insert(dims.end(), s.dims().begin(), s.dims().end());
  return shape(std::move(dims));
}

status parse_shapes(inference_context& c, bool batch) {
  auto keys = c.attr<std::vector<std::string>>("keys");
  auto layouts = c.attr<std::vector<int64_t>>("layouts");
  auto shapes = c.attr<std::vector<shape>>("shapes");
  if (layouts.size() != keys.size() || shapes.size() != keys.size())
    return invalid_argument("keys, layouts and shapes must have one entry per feature");
  int64_t b = -1;
  if (batch) {
    RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 1));
    if (c.input_shape(0).has_known_rank())
      b = c.input_shape(0)[0];
  } else {
    RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
  }
  int o = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (o >= c.num_outputs())
      return invalid_argument("Toutputs has too few entries for the features");
    switch (layouts[i]) {
    case 0: c.set_output(o++, batch ? prepend(b, shapes[i]) : shapes[i]); break;
    case 1:
      c.set_output(o++, batch ? shape{b, -1} : shape{-1});
      c.set_output(o++, batch ? shape{b} : shape{});
      break;
    case 2:
      c.set_output(o++, shape{-1, batch ? 2 : 1});
      c.set_output(o++, shape{-1});
      c.set_output(o++, shape{batch ? 2 : 1});
      break;
    default:
      return invalid_argument("feature '" + keys[i] + "' has layout " +
                              std::to_string(layouts[i]) + " (0 fixed, 1 padded, 2 sparse)");
    }
  }
  if (o != c.num_outputs())
    return invalid_argument("Toutputs has " + std::to_string(c.num_outputs()) +
                            " entries; the features give " + std::to_string(o));
  return {};
}

op_def parse_op(const char* name, bool batch) {
  return op_def(name)
      .input("serialized", dtype::string)
      .input_type_list("defaults", "Tdefaults")
      .output_type_list("outputs", "Toutputs")
      .attr("keys", attr_type::list_string)
      .attr("types", attr_type::list_type)
      .attr("layouts", attr_type::list_int)
      .attr("shapes", attr_type::list_shape)
      .attr("has_default", attr_type::list_int)
      .attr("Tdefaults", attr_type::list_type)
      .attr("Toutputs", attr_type::list_type)
      .shape_fn([batch](inference_context& c) { return parse_shapes(c, batch); });
}

} // namespace

RUNNEL_OP_FAMILY(parsing) {
  add(reg, parse_op("ParseExample", true));
  add(reg, parse_op("ParseSingleExample", false));
  add(reg, op_def("ParseSingleSequenceExample")
               .input("serialized", dtype::string)
               .output_type_list("outputs", "Toutputs")
               .attr("context_keys", attr_type::list_string)
               .attr("context_types", attr_type::list_type)
               .attr("context_shapes", attr_type::list_shape)
               .attr("sequence_keys", attr_type::list_string)
               .attr("sequence_types", attr_type::list_type)
               .attr("sequence_shapes", attr_type::list_shape)
               .attr("Toutputs", attr_type::list_type)
               .shape_fn([](inference_context& c) -> status {
                 RUNNEL_RETURN_IF_ERROR(c.require_rank(0, 0));
                 auto cs = c.attr<std::vector<shape>>("context_shapes");
                 auto ss = c.attr<std::vector<shape>>("sequence_shapes");
                 if (c.num_outputs() != int(cs.size() + 2 * ss.size()))
                   return invalid_argument("Toutputs does not match the features");
                 int o = 0;
                 for (auto& s : cs)
                   c.set_output(o++, s);
                 for (auto& s : ss) {
                   c.set_output(o++, prepend(-1, s));
                   c.set_output(o++, shape{});
                 }
                 return {};
               }));
  add(reg, op_def("DecodeRaw")
               .input("bytes", dtype::string)
               .output("output", "out_type")
               .type_attr("out_type", {dtype::f16, dtype::f32, dtype::f64, dtype::i8, dtype::u8,
                                       dtype::i32, dtype::i64})
               .attr("little_endian", attr_type::boolean, true)
               .shape_fn([](inference_context& c) -> status {
                 const shape& in = c.input_shape(0);
                 if (!in.has_known_rank()) {
                   c.set_output(0, shape::unknown());
                   return {};
                 }
                 std::vector<int64_t> dims = in.dims();
                 dims.push_back(-1);
                 c.set_output(0, shape(std::move(dims)));
                 return {};
               }));
}

} // namespace runnel
