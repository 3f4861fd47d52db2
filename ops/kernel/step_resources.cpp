#include "runnel/ops/kernel/step_resources.hpp"

#include <algorithm>
#include <cstring>

namespace runnel {
namespace {

std::atomic<int64_t>& live_resources() {
  static std::atomic<int64_t> n{0};
  return n;
}

/// Copies every element of `src` into `dst` from element `offset` on.
void copy_into(tensor& dst, int64_t offset, const tensor& src) {
  if (src.type() == dtype::string) {
    auto from = src.flat<std::string>();
    std::copy(from.begin(), from.end(), dst.data<std::string>() + offset);
    return;
  }
  if (src.bytes() > 0)
    std::memcpy(static_cast<char*>(dst.raw_data()) + size_t(offset) * size_of(src.type()),
                src.raw_data(), src.bytes());
}

/// `a + b` elementwise (both of one dtype and shape), for aggregating gradient writes.
result<tensor> add(const tensor& a, const tensor& b) {
  tensor out(a.type(), a.shape());
  return dispatch(a.type(), [&]<class T>() -> result<tensor> {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      auto x = a.flat<T>(), y = b.flat<T>(), z = out.flat<T>();
      for (size_t i = 0; i < z.size(); ++i) {
        if constexpr (std::is_same_v<T, double>)
          z[i] = x[i] + y[i];
        else
          z[i] = T(float(x[i]) + float(y[i]));
      }
      return out;
    } else {
      return unimplemented("adding " + std::string(name(a.type())) + " gradient writes");
    }
  });
}

shape element_shape_of(const tensor& value) {
  std::vector<int64_t> dims(value.shape().dims().begin() + 1, value.shape().dims().end());
  return shape(std::move(dims));
}

} // namespace

tensor_array_resource::tensor_array_resource(std::string name, int64_t size, options opts)
    : name_(std::move(name)), opts_(std::move(opts)), elems_(size_t(size)),
      written_(size_t(size), 0), cleared_(size_t(size), 0),
      written_shapes_(size_t(size), shape::unknown()) {}

status tensor_array_resource::check_index(int64_t index, const char* what) const {
  if (closed_)
    return failed_precondition("TensorArray " + name_ + " has already been closed");
  if (index < 0)
    return invalid_argument(std::string("cannot ") + what + " TensorArray " + name_ +
                            " at index " + std::to_string(index) + ": negative");
  if (index >= int64_t(elems_.size()) && !(opts_.dynamic_size && std::string(what) == "write"))
    return invalid_argument(std::string("cannot ") + what + " TensorArray " + name_ +
                            " at index " + std::to_string(index) + ": its size is " +
                            std::to_string(elems_.size()) +
                            (opts_.dynamic_size ? "" : " and it is not dynamically sized"));
  return {};
}

status tensor_array_resource::write(int64_t index, tensor value) {
  std::lock_guard lock(mu_);
  RUNNEL_RETURN_IF_ERROR(check_index(index, "write"));
  if (value.type() != opts_.type)
    return invalid_argument("cannot write a " + std::string(runnel::name(value.type())) +
                            " tensor to TensorArray " + name_ + " of " +
                            std::string(runnel::name(opts_.type)));
  if (!value.shape().is_compatible_with(opts_.element_shape))
    return invalid_argument("cannot write a tensor of shape " + value.shape().to_string() +
                            " at index " + std::to_string(index) + " of TensorArray " + name_ +
                            ", whose elements have shape " + opts_.element_shape.to_string());
  if (opts_.identical_element_shapes)
    opts_.element_shape = value.shape();
  if (index >= int64_t(elems_.size())) {
    elems_.resize(size_t(index) + 1);
    written_.resize(size_t(index) + 1, 0);
    cleared_.resize(size_t(index) + 1, 0);
    written_shapes_.resize(size_t(index) + 1, shape::unknown());
  }
  auto i = size_t(index);
  if (written_[i]) {
    if (!opts_.multiple_writes_aggregate)
      return invalid_argument("TensorArray " + name_ + ": index " + std::to_string(index) +
                              " was written twice (a TensorArray's elements are written once)");
    if (elems_[i].shape() != value.shape())
      return invalid_argument("TensorArray " + name_ + ": adding a " + value.shape().to_string() +
                              " gradient to index " + std::to_string(index) + ", which holds " +
                              elems_[i].shape().to_string());
    RUNNEL_ASSIGN_OR_RETURN(elems_[i], add(elems_[i], value));
    return {};
  }
  written_shapes_[i] = value.shape();
  elems_[i] = std::move(value);
  written_[i] = 1;
  return {};
}

result<tensor> tensor_array_resource::element(int64_t index, const shape& fallback) {
  auto i = size_t(index);
  if (cleared_[i])
    return invalid_argument("TensorArray " + name_ + ": index " + std::to_string(index) +
                            " was read before and cleared (clear_after_read)");
  if (written_[i]) {
    tensor t = elems_[i];
    if (opts_.clear_after_read && !opts_.multiple_writes_aggregate) {
      elems_[i] = tensor();
      cleared_[i] = 1;
    }
    return t;
  }
  // Never written: zeros when the element shape is known (a gradient that did not flow there):
  // declared, or the forward array's element at this index, or the one asked for.
  shape s = opts_.element_shape.is_fully_defined()                          ? opts_.element_shape
            : i < zero_shapes_.size() && zero_shapes_[i].is_fully_defined() ? zero_shapes_[i]
                                                                            : fallback;
  for (size_t k = 0; !s.is_fully_defined() && k < elems_.size(); ++k)
    if (written_[k])
      s = elems_[k].shape();
  if (!s.is_fully_defined())
    return invalid_argument("TensorArray " + name_ + ": index " + std::to_string(index) +
                            " has not been written and its element shape " + s.to_string() +
                            " is not fully known");
  tensor z(opts_.type, s);
  if (opts_.type != dtype::string && z.bytes() > 0)
    std::memset(z.raw_data(), 0, z.bytes());
  return z;
}

result<tensor> tensor_array_resource::read(int64_t index) {
  std::lock_guard lock(mu_);
  RUNNEL_RETURN_IF_ERROR(check_index(index, "read"));
  return element(index, opts_.element_shape);
}

result<tensor> tensor_array_resource::gather(std::span<const int32_t> indices,
                                             const shape& element_shape) {
  std::lock_guard lock(mu_);
  std::vector<tensor> parts;
  for (int32_t index : indices) {
    RUNNEL_RETURN_IF_ERROR(check_index(index, "gather from"));
    RUNNEL_ASSIGN_OR_RETURN(auto t, element(index, element_shape));
    if (!parts.empty() && t.shape() != parts[0].shape())
      return invalid_argument("TensorArray " + name_ + ": cannot gather elements of shapes " +
                              parts[0].shape().to_string() + " and " + t.shape().to_string() +
                              " (index " + std::to_string(index) + ") into one tensor");
    parts.push_back(std::move(t));
  }
  shape elem = parts.empty() ? (opts_.element_shape.is_fully_defined() ? opts_.element_shape
                                                                        : element_shape)
                             : parts[0].shape();
  if (!elem.is_fully_defined())
    return invalid_argument("TensorArray " + name_ + ": gathering no elements of unknown shape");
  std::vector<int64_t> dims{int64_t(parts.size())};
  dims.insert(dims.end(), elem.dims().begin(), elem.dims().end());
  tensor out(opts_.type, shape(dims));
  int64_t per = elem.num_elements();
  for (size_t k = 0; k < parts.size(); ++k)
    copy_into(out, int64_t(k) * per, parts[k]);
  return out;
}

status tensor_array_resource::scatter(std::span<const int32_t> indices, const tensor& value) {
  if (value.rank() < 1 || value.dim(0) != int64_t(indices.size()))
    return invalid_argument("TensorArray " + name_ + ": scattering " +
                            std::to_string(indices.size()) + " indices needs a value with " +
                            std::to_string(indices.size()) + " rows, got shape " +
                            value.shape().to_string());
  // Elements are views of the value's rows (tensors are not written in place while shared).
  shape row = element_shape_of(value);
  for (size_t k = 0; k < indices.size(); ++k) {
    RUNNEL_ASSIGN_OR_RETURN(auto element, value.slice(int64_t(k), int64_t(k) + 1).reshaped(row));
    RUNNEL_RETURN_IF_ERROR(write(indices[k], std::move(element)));
  }
  return {};
}

result<std::pair<tensor, tensor>> tensor_array_resource::concat(const shape& except0) {
  std::lock_guard lock(mu_);
  std::vector<tensor> parts;
  int64_t rows = 0;
  for (size_t i = 0; i < elems_.size(); ++i) {
    RUNNEL_ASSIGN_OR_RETURN(auto t, element(int64_t(i), shape::unknown()));
    if (t.rank() < 1)
      return invalid_argument("TensorArray " + name_ + ": concat needs elements of rank >= 1, " +
                              "index " + std::to_string(i) + " is a scalar");
    if (!parts.empty() && element_shape_of(t) != element_shape_of(parts[0]))
      return invalid_argument("TensorArray " + name_ + ": concat of elements shaped " +
                              parts[0].shape().to_string() + " and " + t.shape().to_string());
    rows += t.dim(0);
    parts.push_back(std::move(t));
  }
  shape rest = parts.empty() ? except0 : element_shape_of(parts[0]);
  if (!rest.is_fully_defined())
    return invalid_argument("TensorArray " + name_ + ": concat of no elements of unknown shape");
  std::vector<int64_t> dims{rows};
  dims.insert(dims.end(), rest.dims().begin(), rest.dims().end());
  tensor out(opts_.type, shape(dims));
  tensor lengths(dtype::i64, shape{int64_t(parts.size())});
  int64_t at = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    copy_into(out, at, parts[k]);
    at += parts[k].num_elements();
    lengths.data<int64_t>()[k] = parts[k].dim(0);
  }
  return std::pair{out, lengths};
}

status tensor_array_resource::split(const tensor& value, std::span<const int64_t> lengths) {
  if (value.rank() < 1)
    return invalid_argument("TensorArray " + name_ + ": cannot split a scalar");
  int64_t total = 0;
  for (auto l : lengths) {
    if (l < 0)
      return invalid_argument("TensorArray " + name_ + ": negative split length");
    total += l;
  }
  if (total != value.dim(0))
    return invalid_argument("TensorArray " + name_ + ": split lengths sum to " +
                            std::to_string(total) + " but the value has " +
                            std::to_string(value.dim(0)) + " rows");
  int64_t at = 0;
  for (size_t k = 0; k < lengths.size(); ++k) {
    tensor piece = value.slice(at, at + lengths[k]); // a view, as scatter's rows are
    at += lengths[k];
    RUNNEL_RETURN_IF_ERROR(write(int64_t(k), std::move(piece)));
  }
  return {};
}

int64_t tensor_array_resource::size() {
  std::lock_guard lock(mu_);
  return int64_t(elems_.size());
}

void tensor_array_resource::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  elems_.clear();
}

std::shared_ptr<tensor_array_resource> tensor_array_resource::grad(const std::string& source) {
  std::lock_guard lock(mu_);
  auto& g = grads_[source];
  if (!g) {
    options o = opts_;
    o.multiple_writes_aggregate = true;
    o.dynamic_size = false;
    // The declared element shape (or, for identical shapes, the one written first) carries
    // over; elements of differing shapes keep each its own, as the zeros of indices the
    // gradient never reaches.
    g = std::make_shared<tensor_array_resource>(name_ + "@" + source, int64_t(elems_.size()), o);
    g->zero_shapes_ = written_shapes_;
  }
  return g;
}

status stack_resource::push(tensor value) {
  std::lock_guard lock(mu_);
  if (closed_)
    return failed_precondition("Stack " + name_ + " has already been closed");
  if (value.type() != type_)
    return invalid_argument("cannot push a " + std::string(runnel::name(value.type())) +
                            " tensor to Stack " + name_ + " of " +
                            std::string(runnel::name(type_)));
  if (max_size_ >= 0 && int64_t(elems_.size()) >= max_size_)
    return resource_exhausted("Stack " + name_ + " is full (max_size " +
                              std::to_string(max_size_) + ")");
  elems_.push_back(std::move(value));
  return {};
}

result<tensor> stack_resource::pop() {
  std::lock_guard lock(mu_);
  if (closed_)
    return failed_precondition("Stack " + name_ + " has already been closed");
  if (elems_.empty())
    return out_of_range("Stack " + name_ + " is empty");
  tensor t = std::move(elems_.back());
  elems_.pop_back();
  return t;
}

void stack_resource::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  elems_.clear();
}

step_resources::~step_resources() {
  live_resources().fetch_sub(int64_t(arrays_.size() + stacks_.size()), std::memory_order_relaxed);
}

int64_t step_resources::live() {
  return live_resources().load(std::memory_order_relaxed);
}

std::string step_resources::new_handle(const std::string& node) {
  std::lock_guard lock(mu_);
  return node + ":" + std::to_string(next_++);
}

namespace {

template <class T>
void insert(std::mutex& mu, std::unordered_map<std::string, std::shared_ptr<T>>& by_handle,
            const std::string& handle, std::shared_ptr<T> resource) {
  std::lock_guard lock(mu);
  if (by_handle.emplace(handle, std::move(resource)).second)
    live_resources().fetch_add(1, std::memory_order_relaxed);
}

template <class T>
result<std::shared_ptr<T>> lookup(std::mutex& mu,
                                  const std::unordered_map<std::string, std::shared_ptr<T>>& by_handle,
                                  const std::string& handle, const char* what) {
  std::lock_guard lock(mu);
  auto it = by_handle.find(handle);
  if (it == by_handle.end())
    return not_found(std::string("no ") + what + " '" + handle + "' in this step");
  return it->second;
}

} // namespace

void step_resources::add_array(const std::string& handle,
                               std::shared_ptr<tensor_array_resource> ta) {
  insert(mu_, arrays_, handle, std::move(ta));
}

result<std::shared_ptr<tensor_array_resource>> step_resources::array(const std::string& handle) {
  return lookup(mu_, arrays_, handle, "TensorArray");
}

void step_resources::add_stack(const std::string& handle, std::shared_ptr<stack_resource> s) {
  insert(mu_, stacks_, handle, std::move(s));
}

result<std::shared_ptr<stack_resource>> step_resources::stack(const std::string& handle) {
  return lookup(mu_, stacks_, handle, "Stack");
}

} // namespace runnel
