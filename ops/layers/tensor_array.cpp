#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel {
namespace {

shape rows_of(const shape& s) {
  if (!s.has_known_rank() || s.rank() == 0)
    return shape::unknown();
  return shape(std::vector<int64_t>(s.dims().begin() + 1, s.dims().end()));
}

} // namespace

tensor_array::tensor_array(graph& g, dtype type, output size, tensor_array_options options)
    : type_(type), element_shape_(options.element_shape) {
  auto outs = g.build("TensorArrayV3", options.name, {size.ep()},
                      {{"dtype", type},
                       {"element_shape", options.element_shape},
                       {"dynamic_size", options.dynamic_size},
                       {"clear_after_read", options.clear_after_read}});
  handle_ = outs[0];
  flow_ = outs[1];
}

tensor_array tensor_array::with_flow(output flow) const {
  return tensor_array(handle_, flow, type_, element_shape_);
}

tensor_array tensor_array::write(output index, output value) const {
  if (value.type() != type_)
    throw error(invalid_argument("TensorArray '" + handle_.name() + "' holds " +
                                 std::string(name(type_)) + ", not " +
                                 std::string(name(value.type())) + " ('" + value.name() + "')"));
  graph& g = handle_.owner();
  auto flow = g.build("TensorArrayWriteV3", "TensorArrayWrite",
                      {handle_.ep(), index.ep(), value.ep(), flow_.ep()}, {{"T", type_}})[0];
  shape elem = element_shape_;
  if (!elem.is_fully_defined() && value.shape().is_fully_defined())
    elem = value.shape();
  return tensor_array(handle_, flow, type_, elem);
}

output tensor_array::read(output index) const {
  return handle_.owner().build("TensorArrayReadV3", "TensorArrayRead",
                               {handle_.ep(), index.ep(), flow_.ep()},
                               {{"dtype", type_}, {"element_shape", element_shape_}})[0];
}

output tensor_array::gather(output indices) const {
  return handle_.owner().build("TensorArrayGatherV3", "TensorArrayGather",
                               {handle_.ep(), indices.ep(), flow_.ep()},
                               {{"dtype", type_}, {"element_shape", element_shape_}})[0];
}

output tensor_array::stack() const {
  graph& g = handle_.owner();
  auto indices = range(g, constant(g, int32_t(0)), size(), constant(g, int32_t(1)));
  return gather(indices);
}

tensor_array tensor_array::scatter(output indices, output value) const {
  graph& g = handle_.owner();
  auto flow = g.build("TensorArrayScatterV3", "TensorArrayScatter",
                      {handle_.ep(), indices.ep(), value.ep(), flow_.ep()}, {{"T", type_}})[0];
  shape elem = element_shape_.has_known_rank() ? element_shape_ : rows_of(value.shape());
  return tensor_array(handle_, flow, type_, elem);
}

tensor_array tensor_array::unstack(output value) const {
  graph& g = handle_.owner();
  auto n = strided_slice(shape_of(value), {0}, {1}, {1});
  auto count = reshape(n, std::vector<int64_t>{});
  auto indices = range(g, constant(g, int32_t(0)), count, constant(g, int32_t(1)));
  return scatter(indices, value);
}

tensor_array tensor_array::split(output value, output lengths) const {
  graph& g = handle_.owner();
  auto flow = g.build("TensorArraySplitV3", "TensorArraySplit",
                      {handle_.ep(), value.ep(), lengths.ep(), flow_.ep()}, {{"T", type_}})[0];
  return tensor_array(handle_, flow, type_, element_shape_);
}

output tensor_array::concat() const {
  return handle_.owner().build("TensorArrayConcatV3", "TensorArrayConcat",
                               {handle_.ep(), flow_.ep()},
                               {{"dtype", type_},
                                {"element_shape_except0", rows_of(element_shape_)}})[0];
}

output tensor_array::size() const {
  return handle_.owner().build("TensorArraySizeV3", "TensorArraySize",
                               {handle_.ep(), flow_.ep()})[0];
}

operation tensor_array::close() const {
  graph& g = handle_.owner();
  return operation(&g, g.add_op("TensorArrayCloseV3", "TensorArrayClose", {handle_.ep()}).value());
}

tensor_array tensor_array::grad(const std::string& source, output flow) const {
  auto outs = handle_.owner().build("TensorArrayGradV3", "TensorArrayGrad",
                                    {handle_.ep(), flow.ep()}, {{"source", source}});
  return tensor_array(outs[0], outs[1], type_, element_shape_);
}

stack_handle make_stack(graph& g, dtype type, int32_t max_size, std::string_view name) {
  auto h = g.build("StackV2", name, {constant(g, max_size).ep()}, {{"elem_type", type}})[0];
  return {h, type};
}

output stack_push(const stack_handle& s, output value) {
  return s.handle.owner().build("StackPushV2", "StackPush", {s.handle.ep(), value.ep()},
                                {{"T", s.type}})[0];
}

output stack_pop(const stack_handle& s) {
  return s.handle.owner().build("StackPopV2", "StackPop", {s.handle.ep()},
                                {{"elem_type", s.type}})[0];
}

operation stack_close(const stack_handle& s) {
  graph& g = s.handle.owner();
  return operation(&g, g.add_op("StackCloseV2", "StackClose", {s.handle.ep()}).value());
}

} // namespace runnel
