// Runnel graph -> TensorFlow GraphDef.
#include <google/protobuf/text_format.h>

#include <cstring>
#include <fstream>

#include "runnel/ops/graph/graph_def.hpp"
#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {
namespace {

// GraphDef version of the graphs TensorFlow 1.15 writes: readers treat a Placeholder's empty
// shape as a scalar from version 21 on, which is Runnel's meaning too.
constexpr int producer_version = 134;

void to_attr(const attr_value& v, tensorflow::AttrValue* out) {
  struct visitor {
    tensorflow::AttrValue* out;
    void operator()(int64_t i) { out->set_i(i); }
    void operator()(double d) { out->set_f(float(d)); }
    void operator()(bool b) { out->set_b(b); }
    void operator()(const std::string& s) { out->set_s(s); }
    void operator()(dtype t) { out->set_type(tf::to_proto(t)); }
    void operator()(const shape& s) { tf::to_proto(s, out->mutable_shape()); }
    void operator()(const tensor& t) { tf::to_proto(t, out->mutable_tensor()); }
    void operator()(const std::vector<int64_t>& l) {
      auto* list = out->mutable_list();
      for (auto x : l)
        list->add_i(x);
    }
    void operator()(const std::vector<double>& l) {
      auto* list = out->mutable_list();
      for (auto x : l)
        list->add_f(float(x));
    }
    void operator()(const std::vector<dtype>& l) {
      auto* list = out->mutable_list();
      for (auto x : l)
        list->add_type(tf::to_proto(x));
    }
    void operator()(const std::vector<std::string>& l) {
      auto* list = out->mutable_list();
      for (auto& x : l)
        list->add_s(x);
    }
    void operator()(const std::vector<shape>& l) {
      auto* list = out->mutable_list();
      for (auto& x : l)
        tf::to_proto(x, list->add_shape());
    }
  };
  std::visit(visitor{out}, v);
}

} // namespace

std::string export_tf_graph_def(const graph& g, tf_graph_format format) {
  tensorflow::GraphDef gd;
  gd.mutable_versions()->set_producer(producer_version);
  for (auto& n : g.nodes()) {
    node_def d = n.to_def(g);
    auto* out = gd.add_node();
    out->set_name(d.name);
    out->set_op(d.op);
    out->set_device(d.device);
    for (auto& in : d.inputs)
      out->add_input(in);
    auto& attrs = *out->mutable_attr();
    for (auto& [key, v] : d.attrs)
      to_attr(v, &attrs[key]);
  }
  std::string bytes;
  if (format == tf_graph_format::text)
    google::protobuf::TextFormat::PrintToString(gd, &bytes);
  else
    gd.SerializeToString(&bytes);
  return bytes;
}

status save_tf_graph(const graph& g, const std::string& path) {
  bool text = path.ends_with(".pbtxt") || path.ends_with(".txt");
  std::string bytes = export_tf_graph_def(g, text ? tf_graph_format::text : tf_graph_format::binary);
  return write_file_atomically(path, bytes);
}

} // namespace runnel
