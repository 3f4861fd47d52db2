// Remapping into fused kernels (Grappler's remapper): on CPUs, MatMul or Conv2D followed by a
// BiasAdd (or an Add of a vector along the last dimension) and optionally an activation
// (fused_activations in ops/core/unary_ops.hpp) becomes one _FusedMatMul or _FusedConv2D; before
// that, a FusedBatchNorm at inference after a Conv2D with a constant filter is folded into the
// filter and a bias.
#include <algorithm>
#include <cmath>

#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/optimize/rewrite.hpp"

namespace runnel::optimize {
namespace {

using consumer_index = std::vector<std::vector<std::pair<int, int>>>;

/// `v`'s only reader, reading output 0 in slot `slot` (-1: any slot), on the same device; -1
/// when there is none or several, or something waits on `v`.
int only_reader(const rgraph& r, const consumer_index& data,
                const std::vector<std::vector<int>>& control, int v, int slot = -1) {
  auto rs = r.readers(data, v);
  if (rs.size() != 1 || !control[size_t(v)].empty() || r.is_kept(v))
    return -1;
  auto [w, s] = rs[0];
  if ((slot >= 0 && s != slot) || r.nodes[size_t(w)].inputs[size_t(s)].index != 0 ||
      r.placed(w) != r.placed(v))
    return -1;
  return w;
}

bool is_activation(const std::string& op) {
  return find_fused_activation(op) != nullptr;
}

/// The node's "T" when it is one type (Assert's and IdentityN's are lists: invalid).
dtype type_attr(const rnode& n) {
  auto it = n.attrs.find("T");
  auto* t = it == n.attrs.end() ? nullptr : std::get_if<dtype>(&it->second);
  return t ? *t : dtype::invalid;
}

/// Folds FusedBatchNorm(Conv2D(x, W), scale, offset, mean, variance) at inference into
/// Conv2D(x, W·s) + BiasAdd(offset − mean·s), s = scale / sqrt(variance + epsilon).
int fold_batch_norms(rgraph& r, consumer_index& data, std::vector<std::vector<int>>& control) {
  int folded = 0;
  for (int v : r.topo_order()) {
    if (r.nodes[size_t(v)].op != "Conv2D" || !r.on_cpu(v))
      continue;
    int bn = only_reader(r, data, control, v, 0);
    if (bn < 0 || r.nodes[size_t(bn)].op != "FusedBatchNorm" ||
        std::get<bool>(r.nodes[size_t(bn)].attrs.at("is_training")))
      continue;
    const tensor* w = r.constant(r.nodes[size_t(v)].inputs[1].node);
    const tensor* p[4];
    bool ok = w && w->type() == dtype::f32 && w->shape().rank() == 4 &&
              r.nodes[size_t(bn)].control_inputs.empty();
    for (int i = 0; i < 4 && ok; ++i) {
      p[i] = r.constant(r.nodes[size_t(bn)].inputs[size_t(i + 1)].node);
      ok = p[i] && p[i]->shape().rank() == 1 && p[i]->dim(0) == w->dim(3);
    }
    for (auto [reader, slot] : r.readers(data, bn))
      ok &= r.nodes[size_t(reader)].inputs[size_t(slot)].index == 0;
    for (auto e : r.signature.fetches)
      ok &= e.node != bn || e.index == 0;
    if (!ok)
      continue;
    int64_t co = w->dim(3);
    double eps = std::get<double>(r.nodes[size_t(bn)].attrs.at("epsilon"));
    tensor filter(dtype::f32, w->shape()), bias(dtype::f32, shape{co});
    std::vector<float> s(static_cast<size_t>(co));
    for (int64_t c = 0; c < co; ++c) {
      s[size_t(c)] =
          float(p[0]->data<float>()[c] / std::sqrt(double(p[3]->data<float>()[c]) + eps));
      bias.data<float>()[c] = p[1]->data<float>()[c] - p[2]->data<float>()[c] * s[size_t(c)];
    }
    for (int64_t i = 0; i < w->num_elements(); ++i)
      filter.data<float>()[i] = w->data<float>()[i] * s[size_t(i % co)];
    auto add_const = [&](std::string name, tensor t) {
      rnode c{.origin = r.nodes[size_t(v)].origin,
              .name = std::move(name),
              .op = "Const",
              .device = r.nodes[size_t(v)].device,
              .attrs = {{"dtype", dtype::f32}, {"value", t}},
              .types = {dtype::f32},
              .shapes = {t.shape()},
              .frame = r.nodes[size_t(v)].frame};
      r.nodes.push_back(std::move(c));
      r.fed.push_back(0);
      data.emplace_back();
      control.emplace_back();
      return int(r.nodes.size() - 1);
    };
    std::string base = r.nodes[size_t(bn)].name;
    int f = add_const(base + "/_folded_filter", std::move(filter));
    int b = add_const(base + "/_folded_bias", std::move(bias));
    r.nodes[size_t(v)].inputs[1] = {f, 0};
    data[size_t(f)].emplace_back(v, 1);
    rnode& n = r.nodes[size_t(bn)];
    n.op = "BiasAdd";
    n.inputs = {{v, 0}, {b, 0}};
    n.attrs = {{"T", dtype::f32}, {"data_format", std::string("NHWC")}};
    n.types.resize(1);
    n.shapes.resize(1);
    data[size_t(b)].emplace_back(bn, 1);
    ++folded;
  }
  return folded;
}

} // namespace

status remap_fused_ops(rgraph& r) {
  if (!r.source->ops().find("_FusedMatMul") || !r.source->ops().find("_FusedConv2D"))
    return {};
  auto data = r.consumers();
  auto control = r.control_consumers();
  int batch_norms = fold_batch_norms(r, data, control);
  int fused = 0, activations = 0;
  for (int v : r.topo_order()) {
    const rnode& base = r.nodes[size_t(v)];
    dtype t = type_attr(base);
    bool matmul = base.op == "MatMul" && (t == dtype::f32 || t == dtype::f64);
    bool conv = base.op == "Conv2D" && t == dtype::f32;
    if ((!matmul && !conv) || !r.on_cpu(v) || base.shapes[0].rank() < 1)
      continue;
    int64_t channels = base.shapes[0][base.shapes[0].rank() - 1];
    int add = only_reader(r, data, control, v);
    if (add < 0 || channels < 0)
      continue;
    const rnode& a = r.nodes[size_t(add)];
    endpoint bias{-1, 0};
    if (a.op == "BiasAdd" && a.inputs[0].node == v)
      bias = a.inputs[1];
    else if (a.op == "Add" && a.inputs.size() == 2)
      bias = a.inputs[0].node == v ? a.inputs[1] : a.inputs[0];
    if (bias.node < 0 || bias.node == v || type_attr(a) != t)
      continue;
    const shape& bs = r.nodes[size_t(bias.node)].shapes[size_t(bias.index)];
    if (bs.rank() != 1 || bs[0] != channels || a.shapes[0] != base.shapes[0])
      continue;
    int last = add;
    std::string act;
    int next = only_reader(r, data, control, add, 0);
    if (next >= 0 && is_activation(r.nodes[size_t(next)].op) &&
        type_attr(r.nodes[size_t(next)]) == t) {
      last = next;
      act = r.nodes[size_t(next)].op;
    }
    // The last node of the chain becomes the fused node: its name, readers and fetches stay.
    rnode fusedn = r.nodes[size_t(last)];
    fusedn.op = matmul ? "_FusedMatMul" : "_FusedConv2D";
    fusedn.inputs = {base.inputs[0], base.inputs[1], bias};
    fusedn.attrs = base.attrs;
    fusedn.attrs["activation"] = act;
    fusedn.origin = base.origin;
    for (int c : base.control_inputs)
      fusedn.control_inputs.push_back(c);
    if (last != add)
      for (int c : a.control_inputs)
        fusedn.control_inputs.push_back(c);
    std::sort(fusedn.control_inputs.begin(), fusedn.control_inputs.end());
    fusedn.control_inputs.erase(
        std::unique(fusedn.control_inputs.begin(), fusedn.control_inputs.end()),
        fusedn.control_inputs.end());
    for (int s = 0; s < 3; ++s)
      data[size_t(fusedn.inputs[size_t(s)].node)].emplace_back(last, s);
    r.kill(v);
    if (last != add)
      r.kill(add);
    r.nodes[size_t(last)] = std::move(fusedn);
    ++fused;
    activations += act.empty() ? 0 : 1;
  }
  if (batch_norms > 0)
    r.note("folded " + std::to_string(batch_norms) + " FusedBatchNorms into convolutions");
  if (fused > 0)
    r.note("fused " + std::to_string(fused) + " MatMul/Conv2D + bias chains (" +
           std::to_string(activations) + " with their activation)");
  if (batch_norms > 0)
    r.remove_unused();
  return {};
}

} // namespace runnel::optimize
