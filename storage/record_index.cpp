#include "runnel/storage/record_index.hpp"
#include "runnel/ops/core/atomic_file.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runnel/storage/crc32c.hpp"
#include "runnel/storage/record_file.hpp"

namespace runnel {
namespace {

constexpr char magic[8] = {'R', 'N', 'L', 'I', 'D', 'X', '0', '1'};

result<uint64_t> file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return not_found("cannot stat " + path + ": " + std::strerror(errno));
  return uint64_t(st.st_size);
}

void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), 8);
}

} // namespace

std::string record_index_path(const std::string& record_file) {
  return record_file + ".index";
}

result<record_index> write_record_index(const std::string& record_file) {
  RUNNEL_ASSIGN_OR_RETURN(auto reader, record_reader::open(record_file));
  record_index idx;
  RUNNEL_ASSIGN_OR_RETURN(idx.file_bytes, file_size(record_file));
  std::string rec;
  for (;;) {
    uint64_t at = reader.offset();
    RUNNEL_ASSIGN_OR_RETURN(bool more, reader.next(rec));
    if (!more)
      break;
    idx.offsets.push_back(at);
  }
  std::string bytes(magic, 8);
  put_u64(bytes, idx.file_bytes);
  put_u64(bytes, idx.offsets.size());
  for (auto o : idx.offsets)
    put_u64(bytes, o);
  uint32_t crc = crc32c(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&crc), 4);
  RUNNEL_RETURN_IF_ERROR(write_file_atomically(record_index_path(record_file), bytes));
  return idx;
}

result<record_index> read_record_index(const std::string& record_file) {
  auto path = record_index_path(record_file);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("no index " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.size() < 28 || std::memcmp(bytes.data(), magic, 8) != 0)
    return data_loss(path + " is not a Runnel record index");
  uint32_t crc;
  std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
  if (crc32c(bytes.data(), bytes.size() - 4) != crc)
    return data_loss(path + ": bad CRC (corrupt index; rebuild it with `runnel records index`)");
  record_index idx;
  uint64_t count;
  std::memcpy(&idx.file_bytes, bytes.data() + 8, 8);
  std::memcpy(&count, bytes.data() + 16, 8);
  if (bytes.size() != 24 + count * 8 + 4)
    return data_loss(path + ": size does not match its record count");
  idx.offsets.resize(size_t(count));
  if (count)
    std::memcpy(idx.offsets.data(), bytes.data() + 24, size_t(count) * 8);
  RUNNEL_ASSIGN_OR_RETURN(uint64_t now, file_size(record_file));
  if (now != idx.file_bytes)
    return failed_precondition(path + " is stale: " + record_file + " is " + std::to_string(now) +
                               " bytes, the index was built for " + std::to_string(idx.file_bytes));
  return idx;
}

std::string shard_name(const std::string& base, int shard, int num_shards) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d", shard, num_shards);
  return base + buf;
}

result<std::vector<std::string>> expand_record_files(const std::string& pattern) {
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::string p = g.gl_pathv[i];
      if (p.size() < 6 || p.compare(p.size() - 6, 6, ".index") != 0) // skip sidecars
        out.push_back(p);
    }
  globfree(&g);
  if (out.empty())
    return not_found("no record files match '" + pattern + "'");
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace runnel
