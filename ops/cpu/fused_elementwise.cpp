// _FusedElementwise: a chain of element-wise ops the graph optimizer fused
// (ops/optimize/elementwise_fusion.cpp), run by a small interpreter over blocks of 512 elements:
// each instruction makes one vectorised (Eigen) pass over the block's registers, which stay in
// L1, so the chain makes one pass over memory. Inputs of the output's shape or scalars are read
// in place; others are broadcast into the block element by element.
#include <array>
#include <optional>

#include "runnel/ops/core/binary_ops.hpp"
#include "runnel/ops/core/eigen_access.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/cpu/unary_wide.hpp"

namespace runnel {
namespace {

/// One instruction: a row of ops/core/unary_ops.hpp, or one of binary_ops.hpp marked `fused`.
struct instruction {
  bool unary = false;
  unary_op u{};
  binary_op b{};
};

/// The instruction for `op`, or nothing (asked for every node the fusion pass looks at: no
/// error is built for the many it does not take).
std::optional<instruction> instruction_of(const std::string& op) {
  if (auto* row = find_unary_op(op))
    return instruction{.unary = true, .u = row->op};
  if (auto* row = find_binary_op(op); row && row->fused)
    return instruction{.b = row->op};
  return std::nullopt;
}

constexpr int64_t block = 512;
using arr = Eigen::Map<Eigen::ArrayXf>;
using carr = Eigen::Map<const Eigen::ArrayXf>;

void apply(const instruction& in, const float* a, const float* b, float* out, int64_t n) {
  if (in.unary) {
    unary_f32(in.u, a, out, n);
    return;
  }
  carr x(a, n), z(b, n);
  arr y(out, n);
  visit_binary(in.b, [&]<class Row>() {
    if constexpr (Row::fused)
      y = Row::functor::array(x, z);
  });
}

/// Reads a broadcast input into a block of the output's elements: its position is found once per
/// block and then advanced, a run along the output's last dimension at a time (one value
/// repeated, or a strided read). Finding each element's position from scratch, with a division
/// per dimension, was 7.7% of g2p's samples (perf, 2026-12-04).
class broadcast_gather {
public:
  broadcast_gather() = default;
  broadcast_gather(const shape& out, const shape& in) {
    extent_ = out.dims();
    stride_.resize(extent_.size());
    broadcast_strides(in, out, stride_.data());
  }

  /// Elements [at, at + len) of the broadcast of `in`, into `buf`.
  void gather(const float* in, int64_t at, int64_t len, float* buf) const {
    size_t r = extent_.size();
    int64_t fixed[max_rank];
    std::vector<int64_t> more(r > max_rank ? r : 0);
    int64_t* coord = r > max_rank ? more.data() : fixed;
    int64_t index = 0, flat = at;
    for (size_t d = r; d-- > 0;) {
      coord[d] = flat % extent_[d];
      flat /= extent_[d];
      index += coord[d] * stride_[d];
    }
    const int64_t inner = extent_[r - 1], s = stride_[r - 1];
    for (int64_t e = 0; e < len;) {
      int64_t run = std::min(len - e, inner - coord[r - 1]);
      if (s == 0)
        std::fill(buf + e, buf + e + run, in[index]);
      else
        for (int64_t k = 0; k < run; ++k)
          buf[e + k] = in[index + k * s];
      e += run;
      index += run * s;
      coord[r - 1] += run;
      for (size_t d = r - 1; d > 0 && coord[d] == extent_[d]; --d) {
        index += stride_[d - 1] - coord[d] * stride_[d];
        coord[d] = 0;
        ++coord[d - 1];
      }
    }
  }

private:
  static constexpr size_t max_rank = 8; // coordinates on the stack up to this rank
  std::vector<int64_t> extent_, stride_;
};

class fused_elementwise_kernel : public kernel {
public:
  explicit fused_elementwise_kernel(const kernel_construction& c) {
    for (auto& op : c.attr<std::vector<std::string>>("ops")) {
      auto k = instruction_of(op);
      if (!k)
        init_ =
            invalid_argument("_FusedElementwise: '" + op + "' is not an element-wise op it runs");
      else
        ops_.push_back(*k);
    }
    operands_ = c.attr<std::vector<int64_t>>("operands");
    int64_t regs = int64_t(c.node.inputs.size());
    for (size_t k = 0; k < operands_.size() && init_.ok(); ++k)
      if (operands_[k] >= regs + int64_t(k / 2) || operands_[k] < (k % 2 ? -1 : 0))
        init_ = invalid_argument("_FusedElementwise: operand " + std::to_string(k) +
                                 " refers to a value not computed before it");
  }

  status compute(kernel_context& ctx) override {
    RUNNEL_RETURN_IF_ERROR(init_);
    int n_in = ctx.num_inputs();
    std::vector<shape> shapes;
    for (int i = 0; i < n_in; ++i)
      shapes.push_back(ctx.input(i).shape());
    RUNNEL_ASSIGN_OR_RETURN(shape out_shape, broadcast_all(shapes));
    tensor& y = ctx.allocate_output(0, dtype::f32, out_shape);
    int64_t total = y.num_elements();
    // Per input: read in place (1), a scalar (0), the output's trailing dimensions repeated
    // (3: a bias), or broadcast element by element (2).
    std::vector<int> mode(static_cast<size_t>(n_in));
    for (int i = 0; i < n_in; ++i) {
      const shape& s = shapes[size_t(i)];
      int64_t count = ctx.input(i).num_elements();
      bool trailing = s.rank() <= out_shape.rank() && count > 0;
      for (int d = 0; d < s.rank() && trailing; ++d)
        trailing = s[d] == out_shape[out_shape.rank() - s.rank() + d];
      mode[size_t(i)] = s == out_shape ? 1 : count == 1 ? 0 : trailing ? 3 : 2;
    }
    std::vector<broadcast_gather> gathers; // made only for inputs broadcast in general
    for (int i = 0; i < n_in; ++i)
      if (mode[size_t(i)] == 2) {
        gathers.resize(size_t(n_in));
        gathers[size_t(i)] = broadcast_gather(out_shape, shapes[size_t(i)]);
      }
    auto run = [&](int64_t begin, int64_t end) {
      size_t regs = ops_.size() + size_t(n_in);
      std::vector<float> scratch(regs * size_t(block));
      std::vector<const float*> ptr(regs);
      for (int64_t at = begin; at < end; at += block) {
        int64_t len = std::min(block, end - at);
        for (int i = 0; i < n_in; ++i) {
          const float* in = ctx.input(i).data<float>();
          float* buf = scratch.data() + size_t(i) * block;
          if (mode[size_t(i)] == 1) {
            ptr[size_t(i)] = in + at;
          } else if (mode[size_t(i)] == 0) {
            std::fill(buf, buf + len, in[0]);
            ptr[size_t(i)] = buf;
          } else if (mode[size_t(i)] == 3) {
            int64_t count = ctx.input(i).num_elements();
            for (int64_t e = 0, k = at % count; e < len; ++e, k = k + 1 == count ? 0 : k + 1)
              buf[e] = in[k];
            ptr[size_t(i)] = buf;
          } else {
            gathers[size_t(i)].gather(in, at, len, buf);
            ptr[size_t(i)] = buf;
          }
        }
        for (size_t k = 0; k < ops_.size(); ++k) {
          size_t r = size_t(n_in) + k;
          float* dst = k + 1 == ops_.size() ? y.data<float>() + at : scratch.data() + r * block;
          int64_t a = operands_[2 * k], b = operands_[2 * k + 1];
          apply(ops_[k], ptr[size_t(a)], b < 0 ? nullptr : ptr[size_t(b)], dst, len);
          ptr[r] = dst;
        }
      }
    };
    if (ctx.has_cpu())
      ctx.cpu().parallel_for(total, 16384, run);
    else
      run(0, total);
    return {};
  }

private:
  /// The broadcast of all input shapes (NumPy's rules), or an error naming both shapes.
  static result<shape> broadcast_all(const std::vector<shape>& shapes) {
    std::vector<int64_t> out;
    for (auto& s : shapes) {
      std::vector<int64_t> d = s.dims();
      if (d.size() > out.size())
        out.insert(out.begin(), d.size() - out.size(), 1);
      size_t off = out.size() - d.size();
      for (size_t i = 0; i < d.size(); ++i) {
        int64_t& o = out[off + i];
        if (o == 1)
          o = d[i];
        else if (d[i] != 1 && d[i] != o)
          return invalid_argument("incompatible shapes for broadcasting: " +
                                  shape(out).to_string() + " and " + s.to_string());
      }
    }
    return shape(out);
  }
  status init_;
  std::vector<instruction> ops_;
  std::vector<int64_t> operands_;
};

} // namespace

RUNNEL_KERNEL_FAMILY_PART(math, fused_elementwise) {
  reg.add("_FusedElementwise", device_type::cpu, {dtype::f32},
          make_kernel<fused_elementwise_kernel>);
}

/// Whether _FusedElementwise runs `op`.
bool fused_elementwise_runs(const std::string& op) {
  return instruction_of(op).has_value();
}

std::vector<std::string> fused_elementwise_ops() {
  std::vector<std::string> names;
  for (auto& u : unary_ops)
    names.emplace_back(u.name);
  for (auto& b : binary_ops)
    if (b.fused)
      names.emplace_back(b.name);
  return names;
}

} // namespace runnel
