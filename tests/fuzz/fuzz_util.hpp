#pragma once
// Helpers for the fuzz targets: inputs that must live in a file (record files, checkpoints) go
// to one per process under /dev/shm (memory, not disk), rewritten for each input.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace runnel::fuzz {

inline std::string scratch_path(const std::string& suffix) {
  const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/runnel-fuzz-" + std::to_string(::getpid()) + suffix;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    __builtin_trap(); // the fuzzer's own environment is broken: stop loudly
  if (size)
    std::fwrite(data, 1, size, f);
  std::fclose(f);
}

} // namespace runnel::fuzz
