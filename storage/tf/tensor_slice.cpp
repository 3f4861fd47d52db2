#include "runnel/storage/tf/tensor_slice.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace runnel::tf {

namespace {

/// The header bits OrderedCode XORs into the first two bytes of a signed number of each length.
constexpr uint8_t header_bits[11][2] = {{0, 0},    {0x80, 0},    {0xc0, 0},   {0xe0, 0},
                                        {0xf0, 0}, {0xf8, 0},    {0xfc, 0},   {0xfe, 0},
                                        {0xff, 0}, {0xff, 0x80}, {0xff, 0xc0}};

/// Copies the row-major block `part` into `whole` at `starts`, dimension `d` onwards.
void copy_block(char* dst, const char* src, const std::vector<int64_t>& whole_dims,
                const std::vector<int64_t>& part_dims, const std::vector<int64_t>& starts, size_t d,
                size_t elem, bool strings) {
  // Elements of one step along dimension d, in each tensor.
  int64_t whole_stride = 1, part_stride = 1;
  for (size_t k = d + 1; k < whole_dims.size(); ++k) {
    whole_stride *= whole_dims[k];
    part_stride *= part_dims[k];
  }
  dst += size_t(starts[d] * whole_stride) * elem;
  if (d + 1 == whole_dims.size()) {
    auto n = size_t(part_dims[d]);
    if (strings)
      std::copy_n(reinterpret_cast<const std::string*>(src), n,
                  reinterpret_cast<std::string*>(dst));
    else
      std::memcpy(dst, src, n * elem);
    return;
  }
  for (int64_t i = 0; i < part_dims[d]; ++i)
    copy_block(dst + size_t(i * whole_stride) * elem, src + size_t(i * part_stride) * elem,
               whole_dims, part_dims, starts, d + 1, elem, strings);
}

} // namespace

void ordered_write_num(std::string& out, uint64_t v) {
  int n = v == 0 ? 0 : (71 - std::countl_zero(v)) / 8;
  out.push_back(char(n));
  for (int i = n - 1; i >= 0; --i)
    out.push_back(char(uint8_t(v >> (8 * i))));
}

bool ordered_read_num(std::string_view& in, uint64_t& v) {
  if (in.empty())
    return false;
  auto n = size_t(uint8_t(in[0]));
  if (n > 8 || in.size() < n + 1)
    return false;
  v = 0;
  for (size_t i = 1; i <= n; ++i)
    v = (v << 8) | uint8_t(in[i]);
  in.remove_prefix(n + 1);
  return true;
}

void ordered_write_signed(std::string& out, int64_t v) {
  uint64_t x = v < 0 ? ~uint64_t(v) : uint64_t(v);
  if (x < 64) {
    out.push_back(char(0x80 ^ uint8_t(v)));
    return;
  }
  int bits = 64 - std::countl_zero(x);
  int len = bits / 7 + 1;
  uint8_t buf[10];
  buf[0] = buf[1] = v < 0 ? 0xff : 0;
  for (int i = 0; i < 8; ++i)
    buf[2 + i] = uint8_t(uint64_t(v) >> (8 * (7 - i)));
  uint8_t* begin = buf + 10 - len;
  begin[0] ^= header_bits[len][0];
  begin[1] ^= header_bits[len][1];
  out.append(reinterpret_cast<const char*>(begin), size_t(len));
}

bool ordered_read_signed(std::string_view& in, int64_t& v) {
  if (in.empty())
    return false;
  uint8_t mask = (uint8_t(in[0]) & 0x80) ? 0 : 0xff;
  int len = std::countl_one(uint8_t(uint8_t(in[0]) ^ mask));
  if (len == 8) {
    if (in.size() < 2)
      return false;
    len += std::countl_one(uint8_t(uint8_t(in[1]) ^ mask));
    if (len > 10)
      return false;
  }
  if (in.size() < size_t(len))
    return false;
  uint8_t buf[10];
  std::fill(buf, buf + 10, mask);
  std::memcpy(buf + 10 - len, in.data(), size_t(len));
  buf[10 - len] ^= header_bits[len][0];
  if (len >= 2)
    buf[10 - len + 1] ^= header_bits[len][1];
  uint64_t u = 0;
  for (int i = 2; i < 10; ++i)
    u = (u << 8) | buf[i];
  v = int64_t(u);
  in.remove_prefix(size_t(len));
  return true;
}

void ordered_write_string(std::string& out, std::string_view s) {
  for (char c : s) {
    out.push_back(c);
    if (c == '\0')
      out.push_back('\xff');
    else if (c == '\xff')
      out.push_back('\0');
  }
  out.append("\0\x01", 2);
}

bool ordered_read_string(std::string_view& in, std::string& s) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c != '\0' && c != '\xff') {
      out.push_back(c);
      continue;
    }
    if (i + 1 == in.size())
      return false;
    char next = in[++i];
    if (c == '\0' && next == '\x01') {
      s = std::move(out);
      in.remove_prefix(i + 1);
      return true;
    }
    if ((c == '\0' && next != '\xff') || (c == '\xff' && next != '\0'))
      return false;
    out.push_back(c);
  }
  return false;
}

std::string encode_slice_key(const std::string& name, const std::vector<slice_extent>& extents) {
  std::string key;
  ordered_write_num(key, 0);
  ordered_write_string(key, name);
  ordered_write_num(key, extents.size());
  for (auto& e : extents) {
    ordered_write_signed(key, e.start);
    ordered_write_signed(key, e.length);
  }
  return key;
}

result<std::pair<std::string, std::vector<slice_extent>>> decode_slice_key(std::string_view key) {
  std::string_view in = key;
  uint64_t lead = 1, rank = 0;
  std::pair<std::string, std::vector<slice_extent>> out;
  if (!ordered_read_num(in, lead) || lead != 0 || !ordered_read_string(in, out.first) ||
      !ordered_read_num(in, rank) || rank == 0 || rank > 64)
    return data_loss("not a tensor slice key (a 0, the tensor's name, its rank)");
  for (uint64_t d = 0; d < rank; ++d) {
    slice_extent e;
    if (!ordered_read_signed(in, e.start) || !ordered_read_signed(in, e.length))
      return data_loss("the slice key of '" + out.first + "' ends in dimension " +
                       std::to_string(d) + " of " + std::to_string(rank));
    out.second.push_back(e);
  }
  if (!in.empty())
    return data_loss("the slice key of '" + out.first + "' has " + std::to_string(in.size()) +
                     " bytes after its last dimension");
  return out;
}

std::string slice_to_string(const std::vector<slice_extent>& extents) {
  std::string out;
  for (auto& e : extents) {
    if (!out.empty())
      out += ':';
    out += e.length < 0 ? "-" : std::to_string(e.start) + "," + std::to_string(e.length);
  }
  return out;
}

result<shape> slice_shape(const shape& whole, const std::vector<slice_extent>& extents) {
  if (int64_t(extents.size()) != whole.rank())
    return data_loss("slice " + slice_to_string(extents) + " has rank " +
                     std::to_string(extents.size()) + ", the tensor " + whole.to_string());
  std::vector<int64_t> dims;
  for (size_t d = 0; d < extents.size(); ++d) {
    auto& e = extents[d];
    int64_t size = whole.dim(int(d));
    if (e.length < 0) {
      dims.push_back(size);
      continue;
    }
    if (e.start < 0 || e.start > size || e.length > size - e.start)
      return data_loss("slice " + slice_to_string(extents) + " runs past dimension " +
                       std::to_string(d) + " of " + whole.to_string());
    dims.push_back(e.length);
  }
  return shape(std::move(dims));
}

bool slices_overlap(const shape& whole, const std::vector<slice_extent>& a,
                    const std::vector<slice_extent>& b) {
  for (size_t d = 0; d < a.size() && d < b.size(); ++d) {
    int64_t size = whole.dim(int(d));
    int64_t a0 = a[d].length < 0 ? 0 : a[d].start, a1 = a[d].length < 0 ? size : a0 + a[d].length;
    int64_t b0 = b[d].length < 0 ? 0 : b[d].start, b1 = b[d].length < 0 ? size : b0 + b[d].length;
    if (std::max(a0, b0) >= std::min(a1, b1))
      return false; // apart along this dimension (or one of them empty)
  }
  return true;
}

void copy_slice_into(tensor& whole, const tensor& part, const std::vector<slice_extent>& extents) {
  if (part.num_elements() == 0)
    return;
  std::vector<int64_t> starts;
  for (auto& e : extents)
    starts.push_back(e.length < 0 ? 0 : e.start);
  copy_block(static_cast<char*>(whole.raw_data()), static_cast<const char*>(part.raw_data()),
             whole.shape().dims(), part.shape().dims(), starts, 0, size_of(whole.type()),
             whole.type() == dtype::string);
}

} // namespace runnel::tf
