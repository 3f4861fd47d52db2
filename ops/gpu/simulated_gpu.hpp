#pragma once
// A GPU made of host memory and threads, for tests and for trying GPU placement anywhere
// (runtime_options::simulated_gpus). Its memory is host memory labelled as device memory, so
// host code that reads it without a transfer fails as it would on a GPU; its allocator is the
// BFC one, with the runtime's limit; each stream (compute, host-to-device, device-to-host) is a
// thread running its work in order; its kernels are the CPU kernels, run on the compute thread
// on views of their inputs. What it does not model: speed.
#include <memory>

#include "runnel/ops/gpu/accelerator.hpp"

namespace runnel {

/// GPU `id` with at most `memory_limit` bytes of "device" memory.
std::unique_ptr<accelerator> make_simulated_gpu(int id, size_t memory_limit);

} // namespace runnel
