#pragma once
// Embeddings and sparse updates, as TensorFlow's tf.nn.embedding_lookup, partitioned variables
// and scatter ops:
//
//   auto table = partitioned_variable(g, "emb", {vocab, 128},
//                                     [&](const shape& s) { return random_uniform(g, s); },
//                                     fixed_size_partitioner(2));     // one part per ps task
//   auto vectors = embedding_lookup(table, ids);                        // ids: [batch] or [b, t]
//   auto train = adagrad_optimizer(0.1).minimize(loss);   // sparse updates of the rows looked up
//
// The gradient of a lookup is indexed slices (ops/grad/gradients.hpp), so an optimizer updates only
// the rows seen, and across processes only those rows travel. Each part's gather runs where the
// part lives. Ids outside the table fail the step with invalid_argument naming the lookup and
// the id.

#include <functional>
#include <vector>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

// ---- scatter updates of a variable's rows (at the variable's actor) ----
/// ref[indices[i], ...] += updates[i, ...] (duplicates add up).
output scatter_add(const graph_variable& v, output indices, output updates,
                   std::string_view name = {});
output scatter_sub(const graph_variable& v, output indices, output updates,
                   std::string_view name = {});
/// ref[indices[i], ...] = updates[i, ...] (with duplicates, one of them wins).
output scatter_update(const graph_variable& v, output indices, output updates,
                      std::string_view name = {});

// ---- partitioning ----
/// The outputs[p] are the slices of `data` (along the leading dimensions `partitions` covers)
/// whose partition is p, in order.
std::vector<output> dynamic_partition(output data, output partitions, int64_t num_partitions,
                                      std::string_view name = {});
/// merged[indices[i][j], ...] = data[i][j, ...].
output dynamic_stitch(const std::vector<output>& indices, const std::vector<output>& data,
                      std::string_view name = {});

/// How a table's rows map onto its parts (TensorFlow's partition_strategy): `mod` puts id on
/// part id % n at row id / n; `div` gives each part a contiguous range of ids (the first
/// size % n parts one row more).
enum class partition_strategy { mod, div };

/// Row counts of the parts of a variable of shape `s` (split along axis 0).
using partitioner = std::function<std::vector<int64_t>(const shape& s, dtype t)>;
/// `num_shards` parts along axis 0 (fewer when there are fewer rows): the first rows % n
/// parts get one extra row, as TensorFlow's fixed_size_partitioner.
partitioner fixed_size_partitioner(int64_t num_shards);
/// Parts of at most `max_bytes` each (TensorFlow's variable_axis_size_partitioner).
partitioner max_size_partitioner(int64_t max_bytes, int64_t max_shards = 0);

/// A variable split along `axis` (0 for tables, whose lookups need whole rows) into parts named
/// "<name>/part_<i>"; `init` builds each part's initial value from its shape. Each part is an
/// ordinary variable (placed, saved and updated on its own; a replica_device_setter spreads them
/// over the ps tasks). `t` is the table's dtype (what size-based partitioners count bytes with;
/// the initial values must have it). The partitioner sees the shape with `axis` first.
std::vector<graph_variable> partitioned_variable(graph& g, std::string_view name, const shape& s,
                                                 const std::function<output(const shape&)>& init,
                                                 const partitioner& parts, bool trainable = true,
                                                 dtype t = dtype::f32, int axis = 0);

// ---- lookup ----
struct embedding_options {
  partition_strategy strategy = partition_strategy::mod;
  std::string_view name = "embedding_lookup";
};
/// Rows of `params` at `ids` (any shape): the result is ids.shape + params.shape[1:].
output embedding_lookup(output params, output ids, embedding_options o = {});
/// The same over a table split into parts (`strategy` says how ids map to parts).
output embedding_lookup(const std::vector<output>& params, output ids, embedding_options o = {});
output embedding_lookup(const std::vector<graph_variable>& parts, output ids,
                        embedding_options o = {});

} // namespace runnel
