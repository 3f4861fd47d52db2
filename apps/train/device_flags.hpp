#pragma once
// --device auto|cpu|gpu and --simulated-gpus N of the training apps (fashion_mnist, lm, g2p): the
// runtime of a local run as they ask (docs/gpu.md).

#include <memory>
#include <string>

#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/support/app_support.hpp"

/// The two flags' lines of an app's usage text (a string literal, to concatenate).
#define RUNNEL_DEVICE_FLAGS_USAGE                                                                  \
  "  --device auto|cpu|gpu    where the model runs: gpu needs a GPU (ops with GPU kernels and\n"  \
  "                           the variables on GPU:0), cpu ignores GPUs, auto (default) uses a\n" \
  "                           GPU when there is one\n"                                           \
  "  --simulated-gpus N       add N simulated GPUs (host memory, docs/gpu.md): ops with GPU\n"    \
  "                           kernels run there, with transfers (real GPUs are used anyway)\n"

namespace runnel::apps {

/// The runtime --device and --simulated-gpus ask for; an error names the flag at fault, and
/// --device gpu without a GPU says why there is none.
inline std::unique_ptr<runtime> local_training_runtime(const flags& f) {
  int64_t simulated = f.get_int("simulated-gpus", 0).value();
  if (simulated < 0 || simulated > 16)
    throw error(invalid_argument("--simulated-gpus takes a count from 0 to 16, got " +
                                 std::to_string(simulated)));
  std::string device = f.get("device", "auto");
  if (device != "auto" && device != "cpu" && device != "gpu")
    throw error(invalid_argument("--device must be auto, cpu or gpu, got '" + device + "'"));
  runtime_options ro{.simulated_gpus = int(simulated)};
  if (device == "cpu")
    ro.visible_gpus = std::vector<int>{};
  auto rt = std::make_unique<runtime>(ro);
  if (device == "gpu" && !rt->no_gpu_reason().empty())
    throw error(failed_precondition("--device gpu: " + rt->no_gpu_reason()));
  return rt;
}

} // namespace runnel::apps
