#pragma once
// A synthetic model for measuring clusters: the variables of a real network (ResNet-50, every
// layer's output channels divided by a scale factor), cut into pieces of at most a given size,
// and layers whose forward and backward passes are EmulatedCompute nodes that hold the worker's
// device for the layer's share of a stated compute time (by FLOPs; backward twice the forward)
// and produce gradients of the pieces' shapes. The wire carries the real bytes; the ps shards
// really sum and apply them; only the arithmetic of the layers is replaced by waiting.
//
//   auto m = build_synthetic({.scale = 16, .compute_s = 0.1, .ps_tasks = 8, .task = 3,
//                             .sync = sync_replicas_options{...}});
//   session s(rt, m->g, "runnel://...");  s.run(m->feeds(step, replica), {}, {m->train});

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/placement/data_parallel.hpp"

namespace runnel::apps {

/// One layer of the real network: its parameters' shapes and its forward FLOPs per example.
struct layer_shape {
  std::string name;
  std::vector<shape> variables;
  double flops = 0;
};

/// ResNet-50 v1.5 (bottleneck blocks 3-4-6-3, stride on the 3x3 convolutions, 224x224 input):
/// each convolution's kernel [k, k, in, out] and its batch norm's scale and offset as one [2, out]
/// variable, the classifier [2048, 1000] and its bias; output channels divided by `scale`
/// (input channels kept, so every kernel holds 1/scale of its elements).
std::vector<layer_shape> resnet50_layers(int scale);

struct synthetic_options {
  int scale = 16;
  /// Largest piece of a variable (bytes).
  int64_t piece_bytes = 256 << 10;
  /// Emulated forward + backward time of one step of one replica.
  double compute_s = 0.1;
  /// Local run: replicas whose gradients are averaged each step (what as many synchronous
  /// workers compute together).
  int replicas = 1;
  /// Cluster run: ps tasks the pieces are spread over (greedily by size), and this worker's task.
  int ps_tasks = 0;
  int task = 0;
  std::optional<sync_replicas_options> sync;
  double lr = 0.5;
};

struct synthetic_model {
  graph g;
  std::vector<output> inputs; ///< per replica: a float32 [1] fed each step
  operation train;
  graph_variable step;
  std::vector<output> ready;      ///< fetchable once the chief initialized the model
  std::vector<output> parameters; ///< every piece's value, in order
  std::vector<dp_layer> costs;    ///< per layer: emulated time and pieces (shard = ps task)
  int64_t parameter_bytes = 0;
  std::unique_ptr<gradient_descent_optimizer> sgd;
  std::unique_ptr<sync_replicas_optimizer> sync;

  /// The value fed to replica `replica` at step `step`: the same in a local and a cluster run.
  static float input_value(int64_t step, int replica);
};

std::unique_ptr<synthetic_model> build_synthetic(const synthetic_options& o);

} // namespace runnel::apps
