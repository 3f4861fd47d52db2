#pragma once
// Running a peer program (PyTorch, gensim, ...) from a benchmark and reading its figure.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace runnel::bench {

/// Runs `command` and returns the number after `key` on its last line that starts with it, or
/// a negative value (the peer is missing or failed).
inline double run_peer(const std::string& command, const std::string& key) {
  FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!p)
    return -1;
  char line[256];
  double v = -1;
  while (std::fgets(line, sizeof line, p))
    if (std::strncmp(line, key.c_str(), key.size()) == 0)
      v = std::atof(line + key.size());
  ::pclose(p);
  return v;
}

} // namespace runnel::bench
