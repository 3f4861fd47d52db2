// Kernels for embeddings and sparse updates: ScatterAdd/ScatterSub/ScatterUpdate (asynchronous,
// at the variable's actor, touching only the rows named), DynamicPartition, DynamicStitch and
// CheckIndices.
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/variable.hpp"

namespace runnel {
namespace {

std::string index_error(const std::string& what, size_t i, int64_t v, int64_t limit,
                        const std::string& of) {
  return what + "[" + std::to_string(i) + "] = " + std::to_string(v) + " is not in [0, " +
         std::to_string(limit) + ")" + (of.empty() ? "" : ", the rows of " + of);
}

} // namespace

status check_rows(const std::vector<int64_t>& idx, int64_t rows, const std::string& var_name) {
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] < 0 || idx[i] >= rows)
      return invalid_argument(index_error("indices", i, idx[i], rows, var_name));
  return {};
}

namespace {

enum class scatter_kind { add, sub, update };

class scatter_kernel : public kernel {
public:
  scatter_kernel(std::shared_ptr<variable> v, scatter_kind kind)
      : var_(std::move(v)), kind_(kind) {}

  bool is_async() const override { return true; }
  status compute(kernel_context&) override { return internal_error("Scatter kernels are async"); }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    auto idx = to_int64_vector(ctx.input(1));
    if (!idx.ok()) {
      done(idx.error());
      return;
    }
    tensor updates = ctx.input(2);
    auto* out = &ctx.output(0);
    auto fn = [this, idx = std::move(idx).value(), updates](variable::state& s) -> status {
      if (!s.initialized)
        return failed_precondition("attempting to use uninitialized value " + var_->name());
      if (updates.type() != s.value.type())
        return invalid_argument("updates are " + std::string(name(updates.type())) +
                                " but variable " + var_->name() + " is " +
                                std::string(name(s.value.type())));
      int64_t rows = s.value.rank() >= 1 ? s.value.dim(0) : 0;
      int64_t row = rows == 0 ? 0 : s.value.num_elements() / rows;
      if (s.value.rank() < 1 || updates.num_elements() != int64_t(idx.size()) * row)
        return invalid_argument("updates of shape " + updates.shape().to_string() + " for " +
                                std::to_string(idx.size()) + " indices do not fit variable " +
                                var_->name() + " of shape " + s.value.shape().to_string());
      RUNNEL_RETURN_IF_ERROR(check_rows(idx, rows, var_->name()));
      make_writable(s);
      return dispatch_number(updates.type(), [&]<class T>() -> status {
        T* dst = s.value.data<T>();
        const T* src = updates.data<T>();
        for (size_t i = 0; i < idx.size(); ++i) {
          if (i + prefetch_rows < idx.size())
            prefetch_bytes(dst + idx[i + prefetch_rows] * row, size_t(row) * sizeof(T), true);
          T* d = dst + idx[i] * row;
          const T* u = src + int64_t(i) * row;
          switch (kind_) {
            case scatter_kind::add:
              for (int64_t j = 0; j < row; ++j)
                d[j] += u[j];
              break;
            case scatter_kind::sub:
              for (int64_t j = 0; j < row; ++j)
                d[j] -= u[j];
              break;
            case scatter_kind::update:
              std::copy(u, u + row, d);
              break;
          }
        }
        return {};
      });
    };
    var_->update(std::move(fn), output_new_value(out, std::move(done)));
  }

private:
  std::shared_ptr<variable> var_;
  scatter_kind kind_;
};

kernel_factory scatter_factory(scatter_kind kind) {
  return [kind](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
    RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, 0));
    return std::unique_ptr<kernel>(std::make_unique<scatter_kernel>(std::move(v), kind));
  };
}

/// Bytes of one "row" of `t` past its first `lead` dimensions.
int64_t row_bytes(const tensor& t, int lead) {
  int64_t n = 1;
  for (int d = lead; d < t.rank(); ++d)
    n *= t.dim(d);
  return n * int64_t(size_of(t.type()));
}

bool leading_dims_match(const tensor& data, const tensor& idx) {
  if (idx.rank() > data.rank())
    return false;
  for (int d = 0; d < idx.rank(); ++d)
    if (data.dim(d) != idx.dim(d))
      return false;
  return true;
}

class dynamic_partition_kernel : public kernel {
public:
  explicit dynamic_partition_kernel(const kernel_construction& c)
      : n_(c.attr<int64_t>("num_partitions")) {}
  status compute(kernel_context& ctx) override {
    const tensor& data = ctx.input(0);
    const tensor& parts = ctx.input(1);
    if (!leading_dims_match(data, parts))
      return invalid_argument("partitions of shape " + parts.shape().to_string() +
                              " must be a prefix of the data's shape " +
                              data.shape().to_string());
    const int32_t* p = parts.data<int32_t>();
    int64_t count = parts.num_elements();
    std::vector<int64_t> sizes(size_t(n_), 0);
    for (int64_t i = 0; i < count; ++i) {
      if (p[i] < 0 || p[i] >= n_)
        return invalid_argument(index_error("partitions", size_t(i), p[i], n_, ""));
      ++sizes[size_t(p[i])];
    }
    std::vector<int64_t> row_dims(data.shape().dims().begin() + parts.rank(),
                                  data.shape().dims().end());
    std::vector<char*> dst(static_cast<size_t>(n_));
    for (int64_t k = 0; k < n_; ++k) {
      std::vector<int64_t> dims{sizes[size_t(k)]};
      dims.insert(dims.end(), row_dims.begin(), row_dims.end());
      dst[size_t(k)] = static_cast<char*>(
          ctx.allocate_output(int(k), data.type(), shape(dims)).raw_data());
    }
    int64_t rb = row_bytes(data, parts.rank());
    int64_t elems = rb / int64_t(size_of(data.type()));
    auto* src = static_cast<const char*>(data.raw_data());
    for (int64_t i = 0; i < count; ++i) {
      char*& d = dst[size_t(p[i])];
      copy_elements(data.type(), src + i * rb, d, elems);
      d += rb;
    }
    return {};
  }

private:
  int64_t n_;
};

class dynamic_stitch_kernel : public kernel {
public:
  status compute(kernel_context& ctx) override {
    int n = ctx.num_inputs() / 2;
    int64_t rows = 0;
    std::vector<std::vector<int64_t>> idx(static_cast<size_t>(n));
    const tensor& d0 = ctx.input(n);
    int64_t rb = row_bytes(d0, ctx.input(0).rank());
    for (int i = 0; i < n; ++i) {
      const tensor& ind = ctx.input(i);
      const tensor& data = ctx.input(n + i);
      if (!leading_dims_match(data, ind))
        return invalid_argument("data[" + std::to_string(i) + "] has shape " +
                                data.shape().to_string() + " but indices[" + std::to_string(i) +
                                "] has " + ind.shape().to_string() + " (must be a prefix)");
      idx[size_t(i)] = flatten_indices(ind);
      for (size_t j = 0; j < idx[size_t(i)].size(); ++j) {
        int64_t v = idx[size_t(i)][j];
        if (v < 0)
          return invalid_argument("indices[" + std::to_string(i) + "][" + std::to_string(j) +
                                  "] = " + std::to_string(v) + " is negative");
        rows = std::max(rows, v + 1);
      }
      if (row_bytes(data, ind.rank()) != rb)
        return invalid_argument("data[" + std::to_string(i) + "] of shape " +
                                data.shape().to_string() + " has rows unlike data[0]'s " +
                                d0.shape().to_string());
    }
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), d0.shape().dims().begin() + ctx.input(0).rank(),
                d0.shape().dims().end());
    tensor& out = ctx.allocate_output(0, d0.type(), shape(dims));
    int64_t elems = rb / int64_t(size_of(d0.type()));
    auto* dst = static_cast<char*>(out.raw_data());
    for (int i = 0; i < n; ++i) {
      auto* src = static_cast<const char*>(ctx.input(n + i).raw_data());
      for (size_t j = 0; j < idx[size_t(i)].size(); ++j)
        copy_elements(d0.type(), src + int64_t(j) * rb, dst + idx[size_t(i)][j] * rb, elems);
    }
    return {};
  }
};

class check_indices_kernel : public kernel {
public:
  explicit check_indices_kernel(const kernel_construction& c)
      : limit_(c.attr<int64_t>("limit")), what_(c.attr<std::string>("what")) {}
  status compute(kernel_context& ctx) override {
    const tensor& t = ctx.input(0);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      int64_t v = t.type() == dtype::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
      if (v < 0 || v >= limit_)
        return invalid_argument(what_ + " " + std::to_string(v) + " (element " +
                                std::to_string(i) + ") is not in [0, " + std::to_string(limit_) +
                                ")");
    }
    ctx.set_output(0, t);
    return {};
  }

private:
  int64_t limit_;
  std::string what_;
};

} // namespace

RUNNEL_KERNEL_FAMILY(sparse) {
  auto cpu = device_type::cpu;
  reg.add("ScatterAdd", cpu, {}, scatter_factory(scatter_kind::add));
  reg.add("ScatterSub", cpu, {}, scatter_factory(scatter_kind::sub));
  reg.add("ScatterUpdate", cpu, {}, scatter_factory(scatter_kind::update));
  reg.add("DynamicPartition", cpu, {}, make_kernel<dynamic_partition_kernel>);
  reg.add("DynamicStitch", cpu, {}, make_simple_kernel<dynamic_stitch_kernel>);
  reg.add("CheckIndices", cpu, {}, make_kernel<check_indices_kernel>);
}

} // namespace runnel
