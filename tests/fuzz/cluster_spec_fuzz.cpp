// Cluster specs as operators write them (--cluster and --cluster-file text), and device names.
#include "runnel/net/cluster_spec.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = cluster_spec::parse(text);
  if (spec) {
    auto again = cluster_spec::parse(spec->to_string());
    if (!again)
      __builtin_trap(); // what it prints it must read back
  }
  (void)task_of_device(text);
  (void)cluster_spec::split_address(text);
  return 0;
}
