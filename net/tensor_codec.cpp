#include "runnel/net/tensor_codec.hpp"

#include <bit>
#include <cstring>

namespace runnel::net {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

wire::DType to_wire(dtype t) {
  return static_cast<wire::DType>(static_cast<uint16_t>(t));
}

result<dtype> from_wire(wire::DType t) {
  auto v = static_cast<uint16_t>(t);
  if (v == 0 || v > static_cast<uint16_t>(dtype::string))
    return invalid_argument("unknown dtype code " + std::to_string(v));
  return static_cast<dtype>(v);
}

void write_shape(wire::Shape::Builder b, const shape& s) {
  b.setUnknownRank(!s.has_known_rank());
  auto dims = b.initDims(unsigned(std::max(s.rank(), 0)));
  for (int i = 0; i < s.rank(); ++i)
    dims.set(unsigned(i), s[i]);
}

result<shape> read_shape(wire::Shape::Reader r) {
  if (r.getUnknownRank())
    return shape::unknown();
  std::vector<int64_t> dims;
  for (auto d : r.getDims()) {
    if (d < -1)
      return invalid_argument("shape has an invalid dimension " + std::to_string(d));
    dims.push_back(d);
  }
  if (dims.size() > 64)
    return invalid_argument("shape has rank " + std::to_string(dims.size()) + " (at most 64)");
  shape s(std::move(dims));
  // Every element count from the wire is bounded before anything multiplies it by a dtype size.
  if (s.is_fully_defined())
    RUNNEL_RETURN_IF_ERROR(s.checked_num_elements().error());
  return s;
}

void write_tensor(wire::Tensor::Builder b, const tensor& t) {
  b.setDtype(to_wire(t.type()));
  write_shape(b.initShape(), t.shape());
  if (t.type() == dtype::string) {
    auto list = b.initStrings(unsigned(t.num_elements()));
    auto s = t.flat<std::string>();
    for (size_t i = 0; i < s.size(); ++i)
      list.set(unsigned(i),
               capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s[i].data()), s[i].size()));
  } else {
    b.setData(capnp::Data::Reader(static_cast<const kj::byte*>(t.raw_data()), t.bytes()));
  }
}

result<tensor> read_tensor(wire::Tensor::Reader r) {
  RUNNEL_ASSIGN_OR_RETURN(dtype t, from_wire(r.getDtype()));
  RUNNEL_ASSIGN_OR_RETURN(shape s, read_shape(r.getShape()));
  if (!s.is_fully_defined())
    return invalid_argument("tensor shape " + s.to_string() + " is not fully defined");
  if (t == dtype::string) {
    auto list = r.getStrings();
    if (int64_t(list.size()) != s.num_elements())
      return invalid_argument("string tensor of shape " + s.to_string() + " holds " +
                              std::to_string(list.size()) + " strings");
    tensor out(t, s);
    auto dst = out.flat<std::string>();
    for (unsigned i = 0; i < list.size(); ++i)
      dst[i].assign(reinterpret_cast<const char*>(list[i].begin()), list[i].size());
    return out;
  }
  auto data = r.getData();
  size_t expected = size_t(s.num_elements()) * size_of(t);
  if (data.size() != expected)
    return invalid_argument("tensor " + std::string(name(t)) + s.to_string() + " needs " +
                            std::to_string(expected) + " bytes of data, found " +
                            std::to_string(data.size()));
  tensor out(t, s);
  if (expected)
    std::memcpy(out.raw_data(), data.begin(), expected);
  return out;
}

} // namespace runnel::net
