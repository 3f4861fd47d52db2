// The graph loader (Cap'n Proto GraphDef): decoding and building a graph against the built-in
// ops, as `runnel-node` does for every partition a master registers.
#include "runnel/net/graph_def.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto g = parse_graph(bytes, builtin_ops(), "fuzz input");
  if (g.ok())
    (void)serialize_graph(*g);
  return 0;
}
