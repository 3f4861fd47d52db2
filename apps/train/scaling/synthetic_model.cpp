#include "runnel/apps/train/scaling/synthetic_model.hpp"

#include <algorithm>
#include <cstdlib>

#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/emulation.hpp"
#include "runnel/ops/train/replica.hpp"

namespace runnel::apps {

std::vector<layer_shape> resnet50_layers(int scale) {
  if (scale < 1)
    throw error(invalid_argument("--scale must be at least 1, got " + std::to_string(scale)));
  std::vector<layer_shape> layers;
  auto out_channels = [&](int64_t c) { return std::max<int64_t>(1, c / scale); };
  // A convolution with its batch norm; `size` is the output's height and width.
  auto conv = [&](std::string name, int64_t k, int64_t in, int64_t out, int64_t size) {
    layer_shape l{.name = std::move(name),
                  .variables = {shape{k, k, in, out_channels(out)}, shape{2, out_channels(out)}},
                  .flops = 2.0 * double(k * k * in * out) * double(size * size)};
    layers.push_back(std::move(l));
  };
  conv("conv1", 7, 3, 64, 112);
  struct stage {
    int blocks;
    int64_t mid, out, size;
  };
  const stage stages[] = {
      {3, 64, 256, 56}, {4, 128, 512, 28}, {6, 256, 1024, 14}, {3, 512, 2048, 7}};
  int64_t in = 64;
  for (int s = 0; s < 4; ++s) {
    const stage& st = stages[s];
    for (int b = 0; b < st.blocks; ++b) {
      std::string block = "stage" + std::to_string(s + 1) + "/block" + std::to_string(b + 1);
      // The first 1x1 runs at the previous stage's resolution; the 3x3 strides.
      int64_t in_size = (b == 0 && s > 0) ? st.size * 2 : st.size;
      conv(block + "/conv_a", 1, in, st.mid, in_size);
      conv(block + "/conv_b", 3, st.mid, st.mid, st.size);
      conv(block + "/conv_c", 1, st.mid, st.out, st.size);
      if (b == 0)
        conv(block + "/shortcut", 1, in, st.out, st.size);
      in = st.out;
    }
  }
  layers.push_back({.name = "fc",
                    .variables = {shape{2048, out_channels(1000)}, shape{out_channels(1000)}},
                    .flops = 2.0 * 2048 * 1000});
  return layers;
}

float synthetic_model::input_value(int64_t step, int replica) {
  return 0.01f * float(1 + (step * 7 + replica * 3) % 11);
}

std::unique_ptr<synthetic_model> build_synthetic(const synthetic_options& o) {
  auto layers = resnet50_layers(o.scale);
  if (o.replicas < 1 || (o.sync && o.replicas != 1))
    throw error(invalid_argument("replicas must be 1 in a cluster run and at least 1 locally"));
  auto m = std::make_unique<synthetic_model>();
  graph& g = m->g;
  std::optional<graph::scope_guard> placed;
  if (o.ps_tasks > 0)
    placed.emplace(g.device(replica_device_setter(
        o.ps_tasks, "/job:worker/task:" + std::to_string(o.task), ps_strategy::greedy_by_size)));
  double total_flops = 0;
  for (auto& l : layers)
    total_flops += l.flops;
  // Backward passes cost twice their forward pass (a gradient for the input and one for the
  // weights), so the forward pass is a third of the step.
  double forward_s = o.compute_s / 3;

  // Parameters: per layer, its variables' pieces, with starting values that differ by piece.
  std::vector<std::vector<graph_variable>> pieces(layers.size());
  int counter = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto scope = g.name_scope(layers[i].name);
    dp_layer cost{.name = layers[i].name,
                  .forward_s = forward_s * layers[i].flops / total_flops,
                  .backward_s = 2 * forward_s * layers[i].flops / total_flops};
    for (size_t v = 0; v < layers[i].variables.size(); ++v) {
      const shape& s = layers[i].variables[v];
      float start = 0.01f * float(1 + counter++ % 13);
      auto filled_with = [&](const shape& piece) {
        return fill(constant(g, tensor::vector<int32_t>(std::vector<int32_t>(piece.dims().begin(),
                                                                             piece.dims().end()))),
                    constant(g, tensor::scalar<float>(start)));
      };
      // Pieces along the largest axis (a 1x1 convolution's kernel cannot split its first).
      int axis = int(std::max_element(s.dims().begin(), s.dims().end()) - s.dims().begin());
      auto parts = partitioned_variable(
          g, v == 0 ? "weights" : (i + 1 == layers.size() ? "bias" : "bn"), s, filled_with,
          max_size_partitioner(o.piece_bytes), true, dtype::f32, axis);
      for (auto& p : parts) {
        pieces[i].push_back(p);
        m->parameters.push_back(p.value);
        const node& n = p.ref.node();
        int shard = 0;
        if (auto at = n.device.find("/task:"); o.ps_tasks > 0 && at != std::string::npos)
          shard = std::atoi(n.device.c_str() + at + 6);
        double bytes = double(n.output_shapes.at(0).num_elements()) * sizeof(float);
        cost.pieces.push_back({.bytes = bytes, .shard = shard});
        m->parameter_bytes += int64_t(bytes);
      }
    }
    m->costs.push_back(std::move(cost));
  }
  m->step = variable(g, constant(g, int64_t(0)), "global_step", false);

  // Each replica's forward pass, then its backward pass in reverse: gradients of every piece.
  std::vector<std::vector<output>> grads(m->parameters.size());
  for (int r = 0; r < o.replicas; ++r) {
    auto scope = g.name_scope(o.replicas > 1 ? "replica_" + std::to_string(r) : "model");
    m->inputs.push_back(placeholder(g, dtype::f32, shape{1}, "input"));
    std::vector<output> activations{m->inputs.back()};
    for (size_t i = 0; i < layers.size(); ++i) {
      std::vector<output> in{activations.back()};
      for (auto& p : pieces[i])
        in.push_back(p.value);
      activations.push_back(emulated_compute(in, m->costs[i].forward_s, {shape{1}},
                                             layers[i].name + "/forward", 0.05)[0]);
    }
    output upstream = activations.back();
    size_t first = m->parameters.size();
    for (size_t i = layers.size(); i-- > 0;) {
      first -= pieces[i].size();
      std::vector<output> in{upstream, activations[i]};
      std::vector<shape> shapes;
      for (auto& p : pieces[i]) {
        in.push_back(p.value);
        shapes.push_back(p.ref.node().output_shapes.at(0));
      }
      shapes.push_back(shape{1});
      auto outs =
          emulated_compute(in, m->costs[i].backward_s, shapes, layers[i].name + "/backward", 0.05);
      for (size_t k = 0; k < pieces[i].size(); ++k)
        grads[first + k].push_back(outs[k]);
      upstream = outs.back();
    }
  }
  std::vector<std::pair<gradient_value, output>> grads_and_vars;
  size_t k = 0;
  for (auto& layer : pieces)
    for (auto& p : layer) {
      auto& gs = grads[k++];
      output grad = gs.size() == 1 ? gs[0] : add_n(gs) * (1.0 / double(gs.size()));
      grads_and_vars.emplace_back(gradient_value(grad), p.ref);
    }
  m->sgd = std::make_unique<gradient_descent_optimizer>(o.lr);
  if (o.sync) {
    m->sync = std::make_unique<sync_replicas_optimizer>(*m->sgd, *o.sync);
    m->train = m->sync->apply_gradients(grads_and_vars, m->step);
  } else {
    m->train = m->sgd->apply_gradients(grads_and_vars, &m->step);
  }
  m->ready = variables_ready(g);
  return m;
}

} // namespace runnel::apps
