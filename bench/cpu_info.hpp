#pragma once
// The CPU a benchmark ran on, for its first line: our machines of one kind differ (Xeon or EPYC,
// with or without AVX-512), and figures compare only within a run.
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace runnel::bench {

/// "AMD EPYC, 2 cores, AVX2" from /proc/cpuinfo (the model, the cores, the widest vector ISA:
/// AMX, AVX-512 BF16, AVX-512, AVX2 or SSE).
inline std::string cpu_description() {
  std::string model = "unknown CPU", flags;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[8192];
    while (std::fgets(line, sizeof line, f)) {
      const char* colon = std::strchr(line, ':');
      if (!colon)
        continue;
      std::string value(colon + 2 <= line + std::strlen(line) ? colon + 2 : colon + 1);
      while (!value.empty() && (value.back() == '\n' || value.back() == ' '))
        value.pop_back();
      if (std::strncmp(line, "model name", 10) == 0 && model == "unknown CPU")
        model = value;
      else if (std::strncmp(line, "flags", 5) == 0 && flags.empty())
        flags = " " + value + " ";
    }
    std::fclose(f);
  }
  auto has = [&](const char* flag) { return flags.find(" " + std::string(flag) + " ") != std::string::npos; };
  std::string isa = has("amx_bf16")      ? "AMX, AVX-512 BF16"
                    : has("avx512_bf16") ? "AVX-512 BF16"
                    : has("avx512f")     ? "AVX-512"
                    : has("avx2")      ? "AVX2"
                                       : "SSE";
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores, " + isa;
}

} // namespace runnel::bench
