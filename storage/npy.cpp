#include "runnel/storage/npy.hpp"

#include "runnel/ops/core/atomic_file.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

namespace runnel {
namespace {

constexpr char magic[] = "\x93NUMPY";

struct npy_type {
  dtype type;
  size_t size;
};

result<npy_type> parse_descr(const std::string& d, bool& swap) {
  if (d.size() < 3)
    return invalid_argument("dtype '" + d + "' is not understood");
  char order = d[0];
  std::string code = d.substr(1);
  swap = order == '>';
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return invalid_argument("dtype '" + d + "' has an unknown byte order");
  static const std::pair<const char*, npy_type> known[] = {
      {"f2", {dtype::f16, 2}}, {"f4", {dtype::f32, 4}}, {"f8", {dtype::f64, 8}},
      {"i1", {dtype::i8, 1}},  {"u1", {dtype::u8, 1}},  {"i4", {dtype::i32, 4}},
      {"i8", {dtype::i64, 8}}, {"b1", {dtype::boolean, 1}}};
  for (auto& [c, t] : known)
    if (code == c) {
      if (t.size == 1)
        swap = false;
      return t;
    }
  return unimplemented("NumPy dtype '" + d +
                       "' has no Runnel counterpart (supported: f2, f4, f8, i1, u1, i4, i8, b1)");
}

/// The value of `key` in the header's dict literal, as its source text.
result<std::string> dict_value(std::string_view h, const std::string& key) {
  for (char q : {'\'', '"'}) {
    std::string k = std::string(1, q) + key + q;
    auto at = h.find(k);
    if (at == std::string_view::npos)
      continue;
    auto colon = h.find(':', at + k.size());
    if (colon == std::string_view::npos)
      break;
    size_t b = colon + 1;
    while (b < h.size() && h[b] == ' ')
      ++b;
    if (b >= h.size())
      break;
    size_t e;
    if (h[b] == '\'' || h[b] == '"') {
      e = h.find(h[b], b + 1);
      if (e == std::string_view::npos)
        break;
      return std::string(h.substr(b + 1, e - b - 1));
    }
    if (h[b] == '(') {
      e = h.find(')', b);
      if (e == std::string_view::npos)
        break;
      return std::string(h.substr(b, e - b + 1));
    }
    e = h.find_first_of(",}", b);
    if (e == std::string_view::npos)
      break;
    std::string v(h.substr(b, e - b));
    while (!v.empty() && v.back() == ' ')
      v.pop_back();
    return v;
  }
  return invalid_argument("the header has no '" + key + "'");
}

result<shape> parse_shape(const std::string& s) {
  // "(2, 3)", "(5,)", "()"
  std::vector<int64_t> dims;
  size_t i = 1;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ','))
      ++i;
    if (i >= s.size() || s[i] == ')')
      break;
    size_t used = 0;
    long long v;
    try {
      v = std::stoll(s.substr(i), &used);
    } catch (...) {
      return invalid_argument("shape " + s + " is not a tuple of integers");
    }
    if (v < 0 || used == 0)
      return invalid_argument("shape " + s + " has a negative dimension");
    dims.push_back(v);
    i += used;
  }
  if (dims.size() > 32)
    return invalid_argument("shape " + s + " has more than 32 dimensions");
  shape out(std::move(dims));
  auto n = out.checked_num_elements();
  if (!n)
    return invalid_argument("shape " + s + " is too large");
  return out;
}

} // namespace

result<tensor> parse_npy(std::string_view bytes, const std::string& source) {
  auto fail = [&](status s) { return s.with_context(source); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0)
    return fail(data_loss("not a NumPy .npy file (no \\x93NUMPY magic)"));
  int major = uint8_t(bytes[6]);
  size_t header_len, header_at;
  if (major == 1) {
    header_len = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return fail(data_loss("truncated header"));
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    header_at = 12;
  } else {
    return fail(unimplemented(".npy format version " + std::to_string(major) +
                              " is not supported (1, 2 and 3 are)"));
  }
  if (header_at + header_len > bytes.size())
    return fail(data_loss("truncated: the header claims " + std::to_string(header_len) +
                          " bytes, the file has " + std::to_string(bytes.size() - header_at)));
  std::string_view header = bytes.substr(header_at, header_len);
  auto descr = dict_value(header, "descr");
  auto fortran = dict_value(header, "fortran_order");
  auto shape_text = dict_value(header, "shape");
  for (auto* r : {&descr, &fortran, &shape_text})
    if (!*r)
      return fail(r->error().with_context("header"));
  bool swap = false;
  auto type = parse_descr(*descr, swap);
  if (!type)
    return fail(type.error());
  auto s = parse_shape(*shape_text);
  if (!s)
    return fail(s.error());
  size_t data_at = header_at + header_len;
  size_t want = size_t(s->num_elements()) * type->size;
  if (bytes.size() - data_at != want)
    return fail(data_loss("the data is " + std::to_string(bytes.size() - data_at) +
                          " bytes at offset " + std::to_string(data_at) + ", but " + *descr + " " +
                          s->to_string() + " needs " + std::to_string(want)));
  tensor t(type->type, *s);
  const char* src = bytes.data() + data_at;
  char* dst = static_cast<char*>(t.raw_data());
  size_t n = size_t(s->num_elements()), w = type->size;
  if (*fortran == "True" && s->rank() > 1) {
    // Element at C index (i0, ..., ik) sits at i0 + d0 * (i1 + d1 * (...)) in Fortran order.
    auto& dims = s->dims();
    // parse_shape caps the rank at 32, so the index lives on the stack.
    std::array<int64_t, 32> idx{};
    for (size_t c = 0; c < n; ++c) {
      size_t f = 0;
      for (size_t k = dims.size(); k-- > 0;)
        f = f * size_t(dims[k]) + size_t(idx[k]);
      std::memcpy(dst + c * w, src + f * w, w);
      for (size_t k = dims.size(); k-- > 0;) {
        if (++idx[k] < dims[k])
          break;
        idx[k] = 0;
      }
    }
  } else if (*fortran != "False" && *fortran != "True") {
    return fail(invalid_argument("fortran_order is '" + *fortran + "', not True or False"));
  } else if (want) {
    std::memcpy(dst, src, want);
  }
  if (swap)
    for (size_t i = 0; i < n; ++i)
      std::reverse(dst + i * w, dst + (i + 1) * w);
  if (type->type == dtype::boolean)
    for (size_t i = 0; i < n; ++i)
      dst[i] = dst[i] != 0;
  return t;
}

result<tensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

result<std::string> serialize_npy(const tensor& t) {
  const char* descr = nullptr;
  switch (t.type()) {
    case dtype::f16:
      descr = "<f2";
      break;
    case dtype::f32:
      descr = "<f4";
      break;
    case dtype::f64:
      descr = "<f8";
      break;
    case dtype::i8:
      descr = "|i1";
      break;
    case dtype::u8:
      descr = "|u1";
      break;
    case dtype::i32:
      descr = "<i4";
      break;
    case dtype::i64:
      descr = "<i8";
      break;
    case dtype::boolean:
      descr = "|b1";
      break;
    default:
      return unimplemented(std::string("a ") + std::string(name(t.type())) +
                           " tensor cannot be written as .npy (numbers and bool only)");
  }
  if (!t.host_readable())
    return invalid_argument("the tensor is in " + t.memory_name() + "; copy it to the host first");
  std::string dims;
  for (auto d : t.shape().dims())
    dims += std::to_string(d) + ", ";
  if (t.rank() > 1)
    dims.resize(dims.size() - 2);
  else if (t.rank() == 1)
    dims.pop_back();
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  bool v2 = header.size() + 11 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(magic, 6);
  out += char(v2 ? 2 : 1);
  out += char(0);
  size_t len = header.size();
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    out += char((len >> (8 * i)) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw_data()), t.bytes());
  return out;
}

status write_npy(const std::string& path, const tensor& t) {
  RUNNEL_ASSIGN_OR_RETURN(std::string bytes, serialize_npy(t));
  return write_file_atomically(path, bytes);
}

} // namespace runnel
