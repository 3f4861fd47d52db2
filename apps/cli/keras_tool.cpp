// `runnel keras import`: a Keras .h5 model as a graph file `runnel run` takes (docs/keras.md).
#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/storage/keras/keras_import.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel::cli {

const char* keras_usage =
    "usage: runnel keras import MODEL.h5 --out OUT.pb|OUT.pbtxt|OUT.graph\n"
    "Builds the inference graph of a Keras model saved as .h5 (Keras 2 or 3; Sequential or\n"
    "functional) with its weights as constants, and writes it as a TensorFlow GraphDef (or a\n"
    "Runnel graph file for .graph). The inputs are placeholders named after the model's input\n"
    "layers, and each layer's output is named after the layer:\n"
    "  runnel keras import model.h5 --out model.pb\n"
    "  runnel run model.pb --feed dense_input=x.npy --fetch dense_1 --out y.npy\n";

int keras_import(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(keras_usage, stdout);
    return 0;
  }
  std::string file, out;
  int rc = 0;
  if (!parse_file_and_out(args, "keras import", keras_usage, file, out, rc))
    return rc;
  if (file.empty() || out.empty())
    return usage_error("keras import needs MODEL.h5 and --out FILE", keras_usage);
  auto m = import_keras_model(file);
  if (!m)
    return fail(m.error());
  std::printf("%s: %s model '%s'%s, %d layers -> %d nodes\n", file.c_str(), m->class_name.c_str(),
              m->name.c_str(),
              m->keras_version.empty() ? "" : (" (Keras " + m->keras_version + ")").c_str(),
              m->layers, m->g.num_nodes());
  for (auto& i : m->inputs) {
    auto& n = m->g.at(*m->g.find(i));
    std::printf("input:  %s %s%s\n", i.c_str(), std::string(name(n.output_types[0])).c_str(),
                n.output_shapes[0].to_string().c_str());
  }
  for (auto& o : m->outputs) {
    auto& n = m->g.at(*m->g.find(o));
    std::printf("output: %s %s%s\n", o.c_str(), std::string(name(n.output_types[0])).c_str(),
                n.output_shapes[0].to_string().c_str());
  }
  status s = out.ends_with(".graph") ? save_graph(m->g, out) : save_tf_graph(m->g, out);
  if (!s.ok())
    return fail(s);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

} // namespace runnel::cli
