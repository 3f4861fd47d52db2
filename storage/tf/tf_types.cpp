#include "runnel/storage/tf/tf_types.hpp"

#include <cstring>

namespace runnel::tf {

std::string node_of(std::string_view tensor) {
  if (tensor.starts_with('^'))
    tensor.remove_prefix(1);
  if (auto colon = tensor.rfind(':'); colon != std::string_view::npos)
    tensor = tensor.substr(0, colon);
  return std::string(tensor);
}

result<dtype> from_proto(tensorflow::DataType t) {
  int base = int(t) > 100 ? int(t) - 100 : int(t);
  switch (base) {
    case tensorflow::DT_FLOAT:
      return dtype::f32;
    case tensorflow::DT_DOUBLE:
      return dtype::f64;
    case tensorflow::DT_INT32:
      return dtype::i32;
    case tensorflow::DT_UINT8:
      return dtype::u8;
    case tensorflow::DT_INT8:
      return dtype::i8;
    case tensorflow::DT_STRING:
      return dtype::string;
    case tensorflow::DT_INT64:
      return dtype::i64;
    case tensorflow::DT_BOOL:
      return dtype::boolean;
    case tensorflow::DT_BFLOAT16:
      return dtype::bf16;
    case tensorflow::DT_HALF:
      return dtype::f16;
    case tensorflow::DT_RESOURCE:
      // A resource handle: what Runnel's handles are (a TensorArray's names it), so a
      // TensorArrayV3's handle can enter a while frame as TensorFlow's does.
      return dtype::string;
    default:
      return unimplemented("TensorFlow dtype " + type_name(int(t)) +
                           " has no Runnel counterpart (Runnel has float16, bfloat16, float32, "
                           "float64, int8, uint8, int32, int64, bool and string)");
  }
}

tensorflow::DataType to_proto(dtype t) {
  switch (t) {
    case dtype::f16:
      return tensorflow::DT_HALF;
    case dtype::bf16:
      return tensorflow::DT_BFLOAT16;
    case dtype::f32:
      return tensorflow::DT_FLOAT;
    case dtype::f64:
      return tensorflow::DT_DOUBLE;
    case dtype::i8:
      return tensorflow::DT_INT8;
    case dtype::u8:
      return tensorflow::DT_UINT8;
    case dtype::i32:
      return tensorflow::DT_INT32;
    case dtype::i64:
      return tensorflow::DT_INT64;
    case dtype::boolean:
      return tensorflow::DT_BOOL;
    case dtype::string:
      return tensorflow::DT_STRING;
    case dtype::invalid:
      break;
  }
  return tensorflow::DT_INVALID;
}

std::string type_name(int t) {
  if (tensorflow::DataType_IsValid(t))
    return tensorflow::DataType_Name(tensorflow::DataType(t));
  return std::to_string(t);
}

result<shape> from_proto(const tensorflow::TensorShapeProto& s) {
  if (s.unknown_rank())
    return shape::unknown();
  std::vector<int64_t> dims;
  for (auto& d : s.dim()) {
    if (d.size() < -1)
      return invalid_argument("shape has dimension " + std::to_string(d.size()) +
                              " (only -1, unknown, may be negative)");
    dims.push_back(d.size() == -1 ? shape::unknown_dim : d.size());
  }
  if (dims.size() > 64)
    return invalid_argument("shape has rank " + std::to_string(dims.size()) + " (at most 64)");
  return shape(std::move(dims));
}

void to_proto(const shape& s, tensorflow::TensorShapeProto* out) {
  out->Clear();
  if (!s.has_known_rank()) {
    out->set_unknown_rank(true);
    return;
  }
  for (auto d : s.dims())
    out->add_dim()->set_size(d < 0 ? -1 : d);
}

namespace {

/// Fills `n` elements of type T from a repeated field of values of type V.
template <class T, class Field, class Convert>
status fill(tensor& t, const Field& values, Convert convert, const char* field) {
  size_t n = size_t(t.num_elements());
  if (size_t(values.size()) > n)
    return invalid_argument(std::string(field) + " holds " + std::to_string(values.size()) +
                            " values for a tensor of " + std::to_string(n) + " elements");
  T* d = t.data<T>();
  for (size_t i = 0; i < n; ++i) {
    if (values.empty())
      d[i] = T{};
    else
      d[i] = convert(values[int(std::min(i, size_t(values.size()) - 1))]);
  }
  return {};
}

} // namespace

result<tensor> from_proto(const tensorflow::TensorProto& p) {
  RUNNEL_ASSIGN_OR_RETURN(dtype t, from_proto(p.dtype()));
  RUNNEL_ASSIGN_OR_RETURN(shape s, from_proto(p.tensor_shape()));
  if (!s.is_fully_defined())
    return invalid_argument("a tensor's shape must be fully defined, got " + s.to_string());
  auto count = s.checked_num_elements();
  // A protobuf message holds at most 2 GiB, so a real tensor's content is smaller; a few typed
  // values may claim a huge fill, which is refused before anything is allocated.
  constexpr int64_t max_bytes = int64_t(1) << 30;
  if (!count || *count > max_bytes / int64_t(size_of(t)))
    return invalid_argument("tensor of shape " + s.to_string() + " is larger than 1 GiB");
  int64_t n = *count;
  if (!p.tensor_content().empty()) {
    if (t == dtype::string)
      return invalid_argument("a string tensor cannot use tensor_content");
    size_t want = size_t(n) * size_of(t);
    if (p.tensor_content().size() != want)
      return invalid_argument("tensor_content has " + std::to_string(p.tensor_content().size()) +
                              " bytes, but " + std::string(name(t)) + s.to_string() + " needs " +
                              std::to_string(want));
    tensor out(t, s);
    if (want)
      std::memcpy(out.raw_data(), p.tensor_content().data(), want);
    return out;
  }
  // Typed values need memory only for what the shape says: refuse absurd fills before allocating.
  tensor out(t, s);
  auto same = [](auto v) { return v; };
  switch (t) {
    case dtype::f32:
      RUNNEL_RETURN_IF_ERROR(fill<float>(out, p.float_val(), same, "float_val"));
      break;
    case dtype::f64:
      RUNNEL_RETURN_IF_ERROR(fill<double>(out, p.double_val(), same, "double_val"));
      break;
    case dtype::i32:
      RUNNEL_RETURN_IF_ERROR(fill<int32_t>(out, p.int_val(), same, "int_val"));
      break;
    case dtype::i8:
      RUNNEL_RETURN_IF_ERROR(
          fill<int8_t>(out, p.int_val(), [](int32_t v) { return int8_t(v); }, "int_val"));
      break;
    case dtype::u8:
      RUNNEL_RETURN_IF_ERROR(
          fill<uint8_t>(out, p.int_val(), [](int32_t v) { return uint8_t(v); }, "int_val"));
      break;
    case dtype::i64:
      RUNNEL_RETURN_IF_ERROR(fill<int64_t>(out, p.int64_val(), same, "int64_val"));
      break;
    case dtype::boolean:
      RUNNEL_RETURN_IF_ERROR(fill<bool>(out, p.bool_val(), same, "bool_val"));
      break;
    case dtype::f16:
      RUNNEL_RETURN_IF_ERROR(fill<half>(
          out, p.half_val(),
          [](int32_t v) {
            half h;
            h.bits = uint16_t(v);
            return h;
          },
          "half_val"));
      break;
    case dtype::bf16:
      RUNNEL_RETURN_IF_ERROR(fill<bfloat16>(
          out, p.half_val(),
          [](int32_t v) {
            bfloat16 h;
            h.bits = uint16_t(v);
            return h;
          },
          "half_val"));
      break;
    case dtype::string:
      RUNNEL_RETURN_IF_ERROR(fill<std::string>(
          out, p.string_val(), [](const std::string& v) { return v; }, "string_val"));
      break;
    case dtype::invalid:
      return invalid_argument("tensor has no dtype");
  }
  return out;
}

void to_proto(const tensor& t, tensorflow::TensorProto* out) {
  out->Clear();
  out->set_dtype(to_proto(t.type()));
  to_proto(t.shape(), out->mutable_tensor_shape());
  if (t.type() == dtype::string) {
    for (auto& s : t.flat<std::string>())
      out->add_string_val(s);
    return;
  }
  out->set_tensor_content(std::string(static_cast<const char*>(t.raw_data()), t.bytes()));
}

} // namespace runnel::tf
