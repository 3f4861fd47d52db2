#include "runnel/ops/kernel/queue.hpp"

#include <cstring>

namespace runnel {

const char* to_string(queue_kind k) {
  switch (k) {
  case queue_kind::fifo: return "FIFOQueue";
  case queue_kind::random_shuffle: return "RandomShuffleQueue";
  case queue_kind::padding_fifo: return "PaddingFIFOQueue";
  case queue_kind::priority: return "PriorityQueue";
  }
  return "queue";
}

result<queue_spec> queue_spec::from_node_attrs(std::string_view op, const attr_map& attrs) {
  queue_spec s;
  if (op == "FIFOQueueV2")
    s.kind = queue_kind::fifo;
  else if (op == "RandomShuffleQueueV2")
    s.kind = queue_kind::random_shuffle;
  else if (op == "PaddingFIFOQueueV2")
    s.kind = queue_kind::padding_fifo;
  else if (op == "PriorityQueueV2")
    s.kind = queue_kind::priority;
  else
    return invalid_argument("op " + std::string(op) + " is not a queue");
  auto types = find_attr<std::vector<dtype>>(attrs, "component_types");
  if (!types)
    return types.error();
  s.types = *types;
  auto shapes = find_attr<std::vector<shape>>(attrs, "shapes");
  if (!shapes)
    return shapes.error();
  s.shapes = *shapes;
  if (auto padded = find_attr<std::vector<shape>>(attrs, "padded_shapes"))
    s.padded_shapes = *padded;
  s.capacity = get_attr<int64_t>(attrs, "capacity");
  s.dequeue_timeout_ms = get_attr<int64_t>(attrs, "timeout_ms");
  if (auto hint = find_attr<std::string>(attrs, "timeout_hint"); hint.ok())
    s.timeout_hint = *hint;
  if (s.kind == queue_kind::random_shuffle) {
    s.min_after_dequeue = get_attr<int64_t>(attrs, "min_after_dequeue");
    s.seed = get_attr<int64_t>(attrs, "seed");
  }
  return s;
}

namespace {

// Copies `src` (shape `s`) into `dst` laid out with the larger shape `d`, row by row.
void copy_padded(const char* src, char* dst, const shape& s, const shape& d, size_t elem,
                 dtype t, int dim) {
  int rank = s.rank();
  if (rank == 0 || dim == rank - 1) {
    size_t n = rank == 0 ? 1 : size_t(s[dim]);
    if (t == dtype::string) {
      auto* a = reinterpret_cast<const std::string*>(src);
      auto* b = reinterpret_cast<std::string*>(dst);
      for (size_t i = 0; i < n; ++i)
        b[i] = a[i];
    } else {
      std::memcpy(dst, src, n * elem);
    }
    return;
  }
  size_t src_inner = 1, dst_inner = 1;
  for (int k = dim + 1; k < rank; ++k) {
    src_inner *= size_t(s[k]);
    dst_inner *= size_t(d[k]);
  }
  for (int64_t i = 0; i < s[dim]; ++i)
    copy_padded(src + size_t(i) * src_inner * elem, dst + size_t(i) * dst_inner * elem, s, d, elem,
                t, dim + 1);
}

} // namespace

result<tensor> stack_tensors(std::span<const tensor> items, bool pad, const shape& pad_shape) {
  if (items.empty())
    return invalid_argument("cannot stack zero tensors");
  dtype t = items[0].type();
  shape target = items[0].shape();
  for (size_t i = 1; i < items.size(); ++i) {
    const tensor& x = items[i];
    if (x.type() != t)
      return invalid_argument("cannot stack " + std::string(name(x.type())) + " element " +
                              std::to_string(i) + " with " + std::string(name(t)) + " elements");
    if (x.shape() == target)
      continue;
    if (!pad || x.rank() != target.rank())
      return invalid_argument("cannot batch elements of shapes " + target.to_string() + " and " +
                              x.shape().to_string() + " (element " + std::to_string(i) + ")" +
                              (pad ? "" : "; use padding (dynamic_pad, padded_batch) for "
                                          "elements of varying shape"));
    for (int d = 0; d < target.rank(); ++d)
      target.set_dim(d, std::max(target[d], x.dim(d)));
  }
  if (pad && pad_shape.has_known_rank()) {
    if (pad_shape.rank() != target.rank())
      return invalid_argument("padded shape " + pad_shape.to_string() + " has rank " +
                              std::to_string(pad_shape.rank()) + " but elements have shape " +
                              target.to_string());
    for (int d = 0; d < target.rank(); ++d) {
      if (pad_shape[d] < 0)
        continue;
      if (pad_shape[d] < target[d])
        return invalid_argument("an element of shape " + target.to_string() +
                                " does not fit the padded shape " + pad_shape.to_string());
      target.set_dim(d, pad_shape[d]);
    }
  }
  std::vector<int64_t> dims{int64_t(items.size())};
  dims.insert(dims.end(), target.dims().begin(), target.dims().end());
  tensor out(t, shape(std::move(dims)));
  size_t elem = size_of(t);
  size_t per = size_t(target.num_elements());
  char* dst = static_cast<char*>(out.raw_data());
  bool padded = false;
  for (auto& x : items)
    padded |= !(x.shape() == target);
  if (padded && t != dtype::string)
    std::memset(dst, 0, out.bytes());
  for (size_t i = 0; i < items.size(); ++i) {
    const tensor& x = items[i];
    char* row = dst + i * per * elem;
    if (x.shape() == target) {
      if (t == dtype::string) {
        auto* a = x.data<std::string>();
        auto* b = reinterpret_cast<std::string*>(row);
        for (size_t j = 0; j < per; ++j)
          b[j] = a[j];
      } else {
        std::memcpy(row, x.raw_data(), per * elem);
      }
    } else if (x.num_elements() > 0) {
      copy_padded(static_cast<const char*>(x.raw_data()), row, x.shape(), target, elem, t, 0);
    }
  }
  return out;
}

std::vector<tensor> unstack_rows(const tensor& t) {
  std::vector<tensor> rows;
  if (t.rank() < 1)
    return rows;
  shape inner(std::vector<int64_t>(t.shape().dims().begin() + 1, t.shape().dims().end()));
  rows.reserve(size_t(t.dim(0)));
  for (int64_t i = 0; i < t.dim(0); ++i)
    rows.push_back(t.slice(i, i + 1).reshaped(inner).value());
  return rows;
}

} // namespace runnel
