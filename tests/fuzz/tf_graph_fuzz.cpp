// TensorFlow GraphDef import (binary and text, told apart by the bytes), as `runnel graph import`
// and `runnel run` read a user's .pb/.pbtxt; an imported graph is exported again.
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto g = import_tf_graph_def(bytes, tf_graph_format::detect, "fuzz input");
  if (g.ok())
    (void)export_tf_graph_def(*g, tf_graph_format::text);
  return 0;
}
