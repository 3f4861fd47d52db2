#pragma once
// Tensor <-> Cap'n Proto conversion. Internal to net/: it exposes generated capnp types.
#include "net/tensor.capnp.h"
#include "runnel/ops/core/tensor.hpp"

namespace runnel::net {

wire::DType to_wire(dtype t);
result<dtype> from_wire(wire::DType t);
void write_shape(wire::Shape::Builder b, const shape& s);
result<shape> read_shape(wire::Shape::Reader r);
/// Copies `t` into `b` (numbers as little-endian bytes, strings as a list).
void write_tensor(wire::Tensor::Builder b, const tensor& t);
/// Reads a tensor, checking that the data length matches dtype and shape.
result<tensor> read_tensor(wire::Tensor::Reader r);

} // namespace runnel::net
