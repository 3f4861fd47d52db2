#include "runnel/apps/train/fashion_mnist_data.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "runnel/apps/support/records_tools.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel::apps {

/// The shards of one split, converted from idx on first use.
std::vector<std::string> record_shards(const std::string& dir, const std::string& data,
                                       const std::string& split, int shards) {
  namespace fs = std::filesystem;
  std::string base = dir + "/" + split;
  std::vector<std::string> files;
  bool complete = true;
  for (int i = 0; i < shards; ++i) {
    files.push_back(shard_name(base, i, shards));
    complete &= fs::exists(files.back());
  }
  if (complete)
    return files;
  std::string prefix = split == "train" ? "train" : "t10k";
  std::fprintf(stderr, "converting %s/%s-*-idx?-ubyte.gz into %d record shards under %s (once)\n",
               data.c_str(), prefix.c_str(), shards, dir.c_str());
  fs::create_directories(dir);
  // Written under a temporary name of this process's own and renamed, so an interrupted
  // conversion is redone and the workers of a cluster sharing the folder, each converting at
  // once, each rename whole files over the same names (the same bytes).
  auto tmp =
      convert_idx(data + "/" + prefix + "-images-idx3-ubyte.gz",
                  data + "/" + prefix + "-labels-idx1-ubyte.gz",
                  base + ".partial-" + std::to_string(::getpid()), shards, record_compression::none)
          .value();
  for (int i = 0; i < shards; ++i)
    fs::rename(tmp[size_t(i)], files[size_t(i)]);
  return files;
}

/// Serialized Examples (a batch) -> images float32 [B,784] in [0,1], labels int32 [B].
map_fn decode_batch() {
  auto parse = parse_examples({{.key = "image_raw", .type = dtype::string, .shape = {}},
                               {.key = "label", .type = dtype::i64, .shape = {}}});
  return [parse](element e) -> result<element> {
    RUNNEL_ASSIGN_OR_RETURN(auto parsed, parse(std::move(e)));
    int64_t n = parsed[0].dim(0);
    tensor images(dtype::f32, shape{n, 784});
    tensor labels(dtype::i32, shape{n});
    for (int64_t i = 0; i < n; ++i) {
      const std::string& raw = parsed[0].data<std::string>()[i];
      if (raw.size() != 784)
        return invalid_argument("image_raw of record " + std::to_string(i) + " of a batch has " +
                                std::to_string(raw.size()) + " bytes, expected 784");
      float* row = images.data<float>() + i * 784;
      for (int k = 0; k < 784; ++k)
        row[k] = float(uint8_t(raw[size_t(k)])) / 255.f;
      labels.data<int32_t>()[i] = int32_t(parsed[1].data<int64_t>()[i]);
    }
    return element{std::move(images), std::move(labels)};
  };
}

/// A whole split read through a dataset, as one batch.
image_set read_split(const std::vector<std::string>& files, int64_t limit) {
  auto ds = dataset::records(files, {.cycle_length = 1});
  if (limit > 0)
    ds = ds.take(limit);
  auto stream = ds.batch(1 << 30).map(decode_batch()).open().value();
  element all;
  if (!stream->next(all).value())
    throw error(data_loss("no records in " + files.at(0)));
  return {all[0], all[1]};
}

} // namespace runnel::apps
