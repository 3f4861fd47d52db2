#include "runnel/ops/layers/embedding.hpp"

#include <algorithm>

#include <numeric>

namespace runnel {
namespace {

output scatter(const char* op, const graph_variable& v, output indices, output updates,
               std::string_view name) {
  graph& g = v.ref.owner();
  auto col = g.colocate_with(v.ref); // updates live with their variable
  return g.build(op, name.empty() ? op : name, {v.ref.ep(), indices.ep(), updates.ep()})[0];
}

/// A constant of the ids' integer dtype.
output int_constant(graph& g, dtype t, int64_t v, std::string_view name) {
  return t == dtype::i64 ? constant(g, tensor::scalar<int64_t>(v), name)
                         : constant(g, tensor::scalar<int32_t>(int32_t(v)), name);
}

/// The lookup's result shape: ids.shape + params.shape[1:].
output restore_shape(output flat_result, output ids, output params0) {
  const shape& ps = params0.shape();
  bool rows_known = ps.has_known_rank() && ps.rank() >= 1;
  for (int d = 1; rows_known && d < ps.rank(); ++d)
    rows_known = ps[d] >= 0;
  if (ids.shape().is_fully_defined() && rows_known) {
    std::vector<int64_t> dims = ids.shape().dims();
    dims.insert(dims.end(), ps.dims().begin() + 1, ps.dims().end());
    return reshape(flat_result, dims);
  }
  auto row = slice(shape_of(params0), std::vector<int64_t>{1}, std::vector<int64_t>{-1});
  return reshape(flat_result, concat({shape_of(ids), row}, 0));
}

} // namespace

output scatter_add(const graph_variable& v, output indices, output updates, std::string_view name) {
  return scatter("ScatterAdd", v, indices, updates, name);
}
output scatter_sub(const graph_variable& v, output indices, output updates, std::string_view name) {
  return scatter("ScatterSub", v, indices, updates, name);
}
output scatter_update(const graph_variable& v, output indices, output updates,
                      std::string_view name) {
  return scatter("ScatterUpdate", v, indices, updates, name);
}

std::vector<output> dynamic_partition(output data, output partitions, int64_t num_partitions,
                                      std::string_view name) {
  return data.owner().build("DynamicPartition", name.empty() ? "DynamicPartition" : name,
                            {data.ep(), partitions.ep()}, {{"num_partitions", num_partitions}});
}

output dynamic_stitch(const std::vector<output>& indices, const std::vector<output>& data,
                      std::string_view name) {
  if (indices.empty() || indices.size() != data.size())
    throw error(invalid_argument("dynamic_stitch: " + std::to_string(indices.size()) +
                                 " index tensors for " + std::to_string(data.size()) +
                                 " data tensors (need the same number, at least one)"));
  std::vector<endpoint> in;
  for (auto& i : indices)
    in.push_back(i.ep());
  for (auto& d : data)
    in.push_back(d.ep());
  return data[0].owner().build("DynamicStitch", name.empty() ? "DynamicStitch" : name, in,
                               {{"N", int64_t(data.size())}})[0];
}

partitioner fixed_size_partitioner(int64_t num_shards) {
  if (num_shards < 1)
    throw error(invalid_argument("fixed_size_partitioner: num_shards must be at least 1, got " +
                                 std::to_string(num_shards)));
  return [num_shards](const shape& s, dtype) {
    int64_t rows = s.rank() >= 1 ? s[0] : 0;
    int64_t n = std::max<int64_t>(1, std::min(num_shards, rows));
    std::vector<int64_t> counts(size_t(n), rows / n);
    for (int64_t i = 0; i < rows % n; ++i)
      ++counts[size_t(i)];
    return counts;
  };
}

partitioner max_size_partitioner(int64_t max_bytes, int64_t max_shards) {
  if (max_bytes < 1)
    throw error(invalid_argument("max_size_partitioner: max_bytes must be positive"));
  return [max_bytes, max_shards](const shape& s, dtype t) {
    int64_t rows = s.rank() >= 1 ? s[0] : 0;
    int64_t row_bytes = int64_t(size_of(t));
    for (int d = 1; d < s.rank(); ++d)
      row_bytes *= s[d];
    int64_t per_shard = std::max<int64_t>(1, max_bytes / std::max<int64_t>(1, row_bytes));
    int64_t shards = std::max<int64_t>(1, (rows + per_shard - 1) / per_shard);
    if (max_shards > 0)
      shards = std::min(shards, max_shards);
    return fixed_size_partitioner(shards)(s, t);
  };
}

std::vector<graph_variable> partitioned_variable(graph& g, std::string_view name, const shape& s,
                                                 const std::function<output(const shape&)>& init,
                                                 const partitioner& parts, bool trainable,
                                                 dtype t, int axis) {
  if (!s.is_fully_defined() || s.rank() < 1)
    throw error(invalid_argument("partitioned_variable '" + std::string(name) + "': shape " +
                                 s.to_string() + " must be fully defined, of rank at least 1"));
  if (axis < 0 || axis >= s.rank())
    throw error(invalid_argument("partitioned_variable '" + std::string(name) + "': axis " +
                                 std::to_string(axis) + " is not an axis of " + s.to_string()));
  auto scope = g.name_scope(name);
  std::vector<graph_variable> out;
  // The partitioner counts rows along axis 0: show it the shape with `axis` first.
  std::vector<int64_t> rotated = s.dims();
  std::rotate(rotated.begin(), rotated.begin() + axis, rotated.begin() + axis + 1);
  auto counts = parts(shape(rotated), t);
  int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  if (total != s[axis])
    throw error(invalid_argument("partitioned_variable '" + std::string(name) +
                                 "': the partitioner's parts hold " + std::to_string(total) +
                                 " rows, not " + std::to_string(s[axis])));
  for (size_t i = 0; i < counts.size(); ++i) {
    std::vector<int64_t> dims = s.dims();
    dims[size_t(axis)] = counts[i];
    auto value = init(shape(dims));
    if (!(value.shape() == shape(dims)) || value.type() != t)
      throw error(invalid_argument("partitioned_variable '" + std::string(name) +
                                   "': the initializer gave " + std::string(runnel::name(value.type())) +
                                   value.shape().to_string() + " for part " + std::to_string(i) +
                                   ", which must be " + std::string(runnel::name(t)) +
                                   shape(dims).to_string()));
    out.push_back(variable(g, value, "part_" + std::to_string(i), trainable));
  }
  return out;
}

output embedding_lookup(output params, output ids, embedding_options o) {
  graph& g = params.owner();
  auto col = g.colocate_with(params); // the gather runs where the table is: only rows travel
  return gather(params, ids, 0, o.name);
}

output embedding_lookup(const std::vector<graph_variable>& parts, output ids,
                        embedding_options o) {
  std::vector<output> params;
  for (auto& p : parts)
    params.push_back(p.value);
  return embedding_lookup(params, ids, o);
}

output embedding_lookup(const std::vector<output>& params, output ids, embedding_options o) {
  if (params.empty())
    throw error(invalid_argument("embedding_lookup: no params"));
  if (params.size() == 1)
    return embedding_lookup(params[0], ids, o);
  graph& g = ids.owner();
  if (ids.type() != dtype::i32 && ids.type() != dtype::i64)
    throw error(invalid_argument("embedding_lookup: ids '" + ids.name() + "' must be int32 or "
                                 "int64, got " + std::string(name(ids.type()))));
  auto scope = g.name_scope(o.name);
  auto np = int64_t(params.size());
  dtype t = ids.type();
  // The table's rows, when every part's are known: ids are checked against them up front, so
  // an error names the id as given (not its row within a part).
  int64_t total = 0;
  std::vector<int64_t> rows;
  for (auto& p : params) {
    int64_t r = p.shape().has_known_rank() && p.shape().rank() >= 1 ? p.shape()[0] : -1;
    rows.push_back(r);
    total = (total < 0 || r < 0) ? -1 : total + r;
  }
  auto flat = reshape(ids, std::vector<int64_t>{-1}, "flat_ids");
  if (total >= 0)
    flat = g.build("CheckIndices", "check_ids", {flat.ep()},
                   {{"limit", total},
                    {"what", "embedding_lookup '" + std::string(o.name) + "': id"}})[0];
  output part, row;
  auto npc = int_constant(g, t, np, "num_parts");
  if (o.strategy == partition_strategy::mod) {
    part = floor_mod(flat, npc);
    row = floor_div(flat, npc);
  } else {
    if (total < 0)
      throw error(invalid_argument("embedding_lookup '" + std::string(o.name) +
                                   "': the div strategy needs every part's row count"));
    int64_t per = total / np, extras = total % np;
    if (per == 0)
      throw error(invalid_argument("embedding_lookup '" + std::string(o.name) + "': " +
                                   std::to_string(np) + " parts for " + std::to_string(total) +
                                   " rows (the div strategy needs a row per part)"));
    for (int64_t i = 0; i < np; ++i)
      if (rows[size_t(i)] != per + (i < extras ? 1 : 0))
        throw error(invalid_argument(
            "embedding_lookup '" + std::string(o.name) + "': part " + std::to_string(i) +
            " has " + std::to_string(rows[size_t(i)]) + " rows, but the div strategy over " +
            std::to_string(total) + " rows needs " + std::to_string(per + (i < extras ? 1 : 0))));
    auto big = int_constant(g, t, per + 1, "rows_big"), small = int_constant(g, t, per, "rows");
    auto ex = int_constant(g, t, extras, "extras");
    part = maximum(floor_div(flat, big), floor_div(flat - ex, small));
    row = select(less(part, ex), floor_mod(flat, big), floor_mod(flat - ex, small));
  }
  auto part32 = cast(part, dtype::i32, "part");
  auto positions = range(g, constant(g, int32_t(0)), size(flat), constant(g, int32_t(1)),
                         "positions");
  auto part_rows = dynamic_partition(row, part32, np, "part_rows");
  auto part_positions = dynamic_partition(positions, part32, np, "part_positions");
  std::vector<output> gathered;
  for (int64_t i = 0; i < np; ++i) {
    auto col = g.colocate_with(params[size_t(i)]); // each part's rows are read where it lives
    gathered.push_back(gather(params[size_t(i)], part_rows[size_t(i)], 0, "gather"));
  }
  return restore_shape(dynamic_stitch(part_positions, gathered, "stitch"), ids, params[0]);
}

} // namespace runnel
