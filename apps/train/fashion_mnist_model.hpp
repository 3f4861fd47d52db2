#pragma once
// The Fashion-MNIST models (MLP, softmax regression, conv net) with their loss, accuracy and
// train op: plain, distributed (variables on the ps tasks), synchronous, mixed precision.
//
//   auto m = build({.kind = "mlp", .opt_name = "adam", .lr = 0.001});
//   s.run(feeds, {m->loss}, {m->train});
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/sync_replicas.hpp"

namespace runnel::apps {

struct model {
  graph g;
  output x, y, loss, accuracy;
  output training; ///< the cnn's dropout switch (a bool fed per run); invalid for the others
  operation train;
  graph_variable step;
  std::unique_ptr<optimizer> opt;
  std::unique_ptr<loss_scale_optimizer> scaled;  ///< --precision f16
  std::unique_ptr<sync_replicas_optimizer> sync; ///< --sync
  output sync_step; ///< --sync: the global step a worker's train op hands back (its next step)
  /// One int32 per variable, computed where the variable lives: fetchable once every variable
  /// is initialized (the chief's initializer runs on every ps at once; global_step alone may be
  /// ready before the others).
  std::vector<output> ready;
};

struct model_options {
  std::string kind, opt_name;
  double lr = 0.001;
  int64_t seed = 1;
  std::function<std::string(const node&)> device_fn; ///< distributed: variables on the ps tasks
  std::optional<sync_replicas_options> sync;
  bool wire_bf16 = false;
  dtype compute = dtype::f32; ///< --precision: float32 weights, this dtype's math
};

/// The model `o.kind` with its training op.
std::unique_ptr<model> build(const model_options& o);

} // namespace runnel::apps
