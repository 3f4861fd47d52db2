// TensorFlow's ParseExample node as Runnel's (tf_types.hpp, tf::rewrite_parse_example).
//
// TensorFlow's takes its keys and defaults as inputs — serialized, names, Nsparse sparse keys,
// Ndense dense keys, Ndense defaults (an empty tensor for a required feature) — and returns all
// sparse indices, then all sparse values, then all sparse shapes, then the dense values. Runnel's
// takes the keys, layouts and shapes as attributes and the defaults of the features that have
// one as inputs, and returns each feature's outputs together (ops/defs/parsing_ops.cpp).
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {

namespace {

/// The string a scalar Const node holds, for a key input.
result<std::string> key_of(const std::string& input, const tf::node_index& nodes,
                           const std::string& who) {
  auto it = nodes.find(tf::node_of(input));
  if (it == nodes.end() || it->second->op() != "Const" || !it->second->attr().count("value"))
    return unimplemented(
        who + ": key input '" + input +
        "' is not a constant (Runnel's ParseExample takes its keys as attributes)");
  auto& value = it->second->attr().at("value").tensor();
  if (value.string_val_size() != 1)
    return invalid_argument(who + ": key input '" + input + "' is not one string");
  return value.string_val(0);
}

/// Whether a default input is a Const with no elements (a required feature).
bool empty_const(const std::string& input, const tf::node_index& nodes) {
  auto it = nodes.find(tf::node_of(input));
  if (it == nodes.end() || it->second->op() != "Const" || !it->second->attr().count("value"))
    return false;
  auto& t = it->second->attr().at("value").tensor();
  for (auto& d : t.tensor_shape().dim())
    if (d.size() == 0)
      return true;
  return false;
}

} // namespace

std::vector<tensorflow::NodeDef> tf::rewrite_parse_example(const tensorflow::NodeDef& n,
                                                           const node_index& nodes,
                                                           std::vector<std::string>& problems) {
  std::string who = "node '" + n.name() + "' (op ParseExample)";
  auto attr = [&](const char* key) -> const tensorflow::AttrValue* {
    auto it = n.attr().find(key);
    return it == n.attr().end() ? nullptr : &it->second;
  };
  auto* nsparse = attr("Nsparse");
  auto* ndense = attr("Ndense");
  auto* sparse_types = attr("sparse_types");
  auto* tdense = attr("Tdense");
  auto* dense_shapes = attr("dense_shapes");
  if (!nsparse || !ndense || !sparse_types || !tdense || !dense_shapes) {
    problems.push_back(who + ": needs the attributes Nsparse, Ndense, sparse_types, Tdense and "
                             "dense_shapes (TensorFlow 1.x's ParseExample)");
    return {};
  }
  int64_t ns = nsparse->i(), nd = ndense->i();
  int data_inputs = 0;
  while (data_inputs < n.input_size() && !n.input(data_inputs).starts_with('^'))
    ++data_inputs;
  if (ns < 0 || nd < 0 || data_inputs != 2 + 2 * nd + ns ||
      sparse_types->list().type_size() != ns || tdense->list().type_size() != nd ||
      dense_shapes->list().shape_size() != nd) {
    problems.push_back(who + ": " + std::to_string(data_inputs) +
                       " inputs and its type lists do not match Nsparse = " + std::to_string(ns) +
                       ", Ndense = " + std::to_string(nd));
    return {};
  }
  // Sparse features first, then dense: with at most one sparse feature Runnel's outputs are
  // TensorFlow's (indices, values, shape, dense...); with more, an IdentityN of TensorFlow's
  // name reorders them.
  bool reorder = ns > 1;
  tensorflow::NodeDef out;
  out.set_name(reorder ? n.name() + "/runnel_parse" : n.name());
  out.set_op("ParseExample");
  out.set_device(n.device());
  out.add_input(n.input(0));
  auto& a = *out.mutable_attr();
  auto* keys = a["keys"].mutable_list();
  auto* types = a["types"].mutable_list();
  auto* layouts = a["layouts"].mutable_list();
  auto* shapes = a["shapes"].mutable_list();
  auto* has_default = a["has_default"].mutable_list();
  auto* tdefaults = a["Tdefaults"].mutable_list();
  auto* toutputs = a["Toutputs"].mutable_list();
  for (int64_t k = 0; k < ns; ++k) {
    auto key = key_of(n.input(int(2 + k)), nodes, who);
    if (!key) {
      problems.push_back(key.error().message());
      return {};
    }
    auto type = tensorflow::DataType(sparse_types->list().type(int(k)));
    keys->add_s(*key);
    types->add_type(type);
    layouts->add_i(2);
    shapes->add_shape();
    has_default->add_i(0);
    toutputs->add_type(tensorflow::DT_INT64);
    toutputs->add_type(type);
    toutputs->add_type(tensorflow::DT_INT64);
  }
  for (int64_t j = 0; j < nd; ++j) {
    auto key = key_of(n.input(int(2 + ns + j)), nodes, who);
    if (!key) {
      problems.push_back(key.error().message());
      return {};
    }
    auto& dims = dense_shapes->list().shape(int(j));
    if (dims.unknown_rank() || (dims.dim_size() > 0 && dims.dim(0).size() < 0)) {
      problems.push_back(who + ": dense feature '" + *key +
                         "' has a variable length "
                         "(FixedLenSequenceFeature), which this import does not map");
      return {};
    }
    auto type = tensorflow::DataType(tdense->list().type(int(j)));
    keys->add_s(*key);
    types->add_type(type);
    layouts->add_i(0);
    *shapes->add_shape() = dims;
    toutputs->add_type(type);
    const std::string& def = n.input(int(2 + ns + nd + j));
    bool required = empty_const(def, nodes);
    has_default->add_i(required ? 0 : 1);
    if (!required) {
      out.add_input(def);
      tdefaults->add_type(type);
    }
  }
  for (int i = data_inputs; i < n.input_size(); ++i)
    out.add_input(n.input(i));
  std::vector<tensorflow::NodeDef> nodes_out{out};
  if (!reorder)
    return nodes_out;
  // TensorFlow's output i: the indices, values and shapes of sparse features, then the dense.
  tensorflow::NodeDef id;
  id.set_name(n.name());
  id.set_op("IdentityN");
  id.set_device(n.device());
  auto* t = (*id.mutable_attr())["T"].mutable_list();
  for (int part = 0; part < 3; ++part)
    for (int64_t k = 0; k < ns; ++k) {
      id.add_input(out.name() + ":" + std::to_string(3 * k + part));
      t->add_type(toutputs->type(int(3 * k + part)));
    }
  for (int64_t j = 0; j < nd; ++j) {
    id.add_input(out.name() + ":" + std::to_string(3 * ns + j));
    t->add_type(toutputs->type(int(3 * ns + j)));
  }
  nodes_out.push_back(std::move(id));
  return nodes_out;
}

} // namespace runnel
