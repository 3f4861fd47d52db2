// A TensorFlow MetaGraphDef (`.meta`, binary or text): the graph less its savers' scopes, the
// VariableDef collections, the signatures, as `runnel graph import model.meta` reads them.
#include "runnel/storage/tf/meta_graph.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)import_tf_meta_graph_def(bytes, "fuzz.meta");
  return 0;
}
