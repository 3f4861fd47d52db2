#pragma once
// Fashion-MNIST's data for the app: the idx files converted once into sharded record files of
// tf.train.Examples, batches of serialized Examples decoded into tensors, a whole split read at
// once.
#include <string>
#include <vector>

#include "runnel/actors/data/dataset.hpp"
#include "runnel/apps/support/app_support.hpp"

namespace runnel::apps {

/// The record shards of `split` ("train" or "test") under `dir`, converted from the idx files
/// under `data` on first use.
std::vector<std::string> record_shards(const std::string& dir, const std::string& data,
                                       const std::string& split, int shards);
/// Serialized Examples (a batch) -> images float32 [B,784] in [0,1], labels int32 [B].
map_fn decode_batch();
/// A whole split read through a dataset, as one batch (the first `limit` images; 0: all).
image_set read_split(const std::vector<std::string>& files, int64_t limit);

} // namespace runnel::apps
