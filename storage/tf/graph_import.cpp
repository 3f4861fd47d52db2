// TensorFlow GraphDef -> Runnel graph (see tf_graph.hpp for the rules).
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "runnel/ops/graph/graph_def.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {
namespace {

/// TensorFlow ops that are Runnel ops under another name (same inputs, outputs and attributes).
const std::map<std::string, std::string, std::less<>> renamed_ops = {
    {"AddV2", "Add"},
    {"BiasAddV1", "BiasAdd"},
    // TensorFlow 1.x's first gather: GatherV2 along axis 0 (build adds the axis).
    {"Gather", "GatherV2"},
};

/// Attributes TensorFlow writes that Runnel's op lacks, harmless at these values.
bool harmless_extra(std::string_view name, const tensorflow::AttrValue& v) {
  if (name == "explicit_paddings")
    return v.has_list() && v.list().i_size() == 0;
  if (name == "batch_dims")
    return v.i() == 0;
  if (name == "exponential_avg_factor")
    return v.f() == 1.0f;
  if (name == "validate_indices" || name == "use_cudnn_on_gpu")
    return true;
  return false;
}

std::string describe(const tensorflow::AttrValue& v) {
  std::string s;
  google::protobuf::TextFormat::Printer p;
  p.SetSingleLineMode(true);
  p.PrintToString(v, &s);
  if (s.size() > 80)
    s = s.substr(0, 77) + "...";
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return "{" + s + "}";
}

const char* kind_name(tensorflow::AttrValue::ValueCase c) {
  switch (c) {
    case tensorflow::AttrValue::kS:
      return "a string";
    case tensorflow::AttrValue::kI:
      return "an int";
    case tensorflow::AttrValue::kF:
      return "a float";
    case tensorflow::AttrValue::kB:
      return "a bool";
    case tensorflow::AttrValue::kType:
      return "a type";
    case tensorflow::AttrValue::kShape:
      return "a shape";
    case tensorflow::AttrValue::kTensor:
      return "a tensor";
    case tensorflow::AttrValue::kList:
      return "a list";
    case tensorflow::AttrValue::kFunc:
      return "a function";
    case tensorflow::AttrValue::kPlaceholder:
      return "a placeholder";
    case tensorflow::AttrValue::VALUE_NOT_SET:
      break;
  }
  return "empty";
}

/// The value as the attribute type Runnel's op declares.
result<attr_value> convert_attr(const tensorflow::AttrValue& v, attr_type want) {
  using V = tensorflow::AttrValue;
  auto expect = [&](V::ValueCase c) -> status {
    if (v.value_case() == c)
      return {};
    return invalid_argument(std::string("expected ") + to_string(want) + ", the file has " +
                            kind_name(v.value_case()));
  };
  auto list = [&]() -> status {
    // An empty list is written either as `list {}` or not at all.
    if (v.value_case() == V::kList || v.value_case() == V::VALUE_NOT_SET)
      return {};
    return expect(V::kList);
  };
  switch (want) {
    case attr_type::integer:
      RUNNEL_RETURN_IF_ERROR(expect(V::kI));
      return attr_value(int64_t(v.i()));
    case attr_type::real:
      RUNNEL_RETURN_IF_ERROR(expect(V::kF));
      return attr_value(double(v.f()));
    case attr_type::boolean:
      RUNNEL_RETURN_IF_ERROR(expect(V::kB));
      return attr_value(v.b());
    case attr_type::string:
      RUNNEL_RETURN_IF_ERROR(expect(V::kS));
      return attr_value(v.s());
    case attr_type::type: {
      RUNNEL_RETURN_IF_ERROR(expect(V::kType));
      RUNNEL_ASSIGN_OR_RETURN(dtype t, tf::from_proto(v.type()));
      return attr_value(t);
    }
    case attr_type::shape: {
      RUNNEL_RETURN_IF_ERROR(expect(V::kShape));
      RUNNEL_ASSIGN_OR_RETURN(shape s, tf::from_proto(v.shape()));
      return attr_value(std::move(s));
    }
    case attr_type::tensor: {
      RUNNEL_RETURN_IF_ERROR(expect(V::kTensor));
      RUNNEL_ASSIGN_OR_RETURN(tensor t, tf::from_proto(v.tensor()));
      return attr_value(std::move(t));
    }
    case attr_type::list_int:
      RUNNEL_RETURN_IF_ERROR(list());
      return attr_value(std::vector<int64_t>(v.list().i().begin(), v.list().i().end()));
    case attr_type::list_real:
      RUNNEL_RETURN_IF_ERROR(list());
      return attr_value(std::vector<double>(v.list().f().begin(), v.list().f().end()));
    case attr_type::list_string:
      RUNNEL_RETURN_IF_ERROR(list());
      return attr_value(std::vector<std::string>(v.list().s().begin(), v.list().s().end()));
    case attr_type::list_type: {
      RUNNEL_RETURN_IF_ERROR(list());
      std::vector<dtype> out;
      for (int t : v.list().type()) {
        RUNNEL_ASSIGN_OR_RETURN(dtype d, tf::from_proto(tensorflow::DataType(t)));
        out.push_back(d);
      }
      return attr_value(std::move(out));
    }
    case attr_type::list_shape: {
      RUNNEL_RETURN_IF_ERROR(list());
      std::vector<shape> out;
      for (auto& s : v.list().shape()) {
        RUNNEL_ASSIGN_OR_RETURN(shape x, tf::from_proto(s));
        out.push_back(std::move(x));
      }
      return attr_value(std::move(out));
    }
  }
  return invalid_argument("unknown attribute type");
}

/// One node's problems go into `problems`; the node_def is filled as far as it converts.
node_def convert_node(const tensorflow::NodeDef& n, const op_registry& ops, bool legacy,
                      std::vector<std::string>& unsupported_ops,
                      std::vector<std::string>& problems) {
  node_def d;
  d.name = n.name();
  d.op = imported_op_name(n.op());
  d.device = n.device();
  d.inputs.assign(n.input().begin(), n.input().end());
  const op_def* def = ops.find(d.op);
  std::string who = "node '" + n.name() + "' (op " + n.op() + ")";
  if (!def) {
    unsupported_ops.push_back(who);
    return d;
  }
  // protobuf maps iterate in no fixed order: sort the keys so errors are deterministic.
  std::vector<std::string> keys;
  for (auto& [k, _] : n.attr())
    keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (auto& key : keys) {
    const tensorflow::AttrValue& v = n.attr().at(key);
    if (key == "_class") {
      if (v.has_list())
        d.attrs[key] = std::vector<std::string>(v.list().s().begin(), v.list().s().end());
      continue;
    }
    const attr_def* want = def->find_attr_def(key);
    if (!want) {
      bool inferred = v.value_case() == tensorflow::AttrValue::kType ||
                      (v.has_list() && v.list().type_size() > 0);
      if (key.starts_with('_') || inferred || harmless_extra(key, v))
        continue;
      problems.push_back(who + ": attribute '" + key + "' = " + describe(v) +
                         " is not supported by Runnel's " + d.op);
      continue;
    }
    auto value = convert_attr(v, want->type);
    if (!value) {
      problems.push_back(who + ": attribute '" + key + "': " + value.error().message());
      continue;
    }
    d.attrs[key] = std::move(value).value();
  }
  // Before GraphDef version 21 (and in graphs with no versions at all), a Placeholder's shape
  // with no dimensions meant "unknown", not "scalar".
  if (legacy && d.op == "Placeholder") {
    auto it = d.attrs.find("shape");
    if (it != d.attrs.end())
      if (auto* s = std::get_if<shape>(&it->second); s && s->has_known_rank() && s->rank() == 0)
        it->second = shape::unknown();
  }
  return d;
}

std::string join_limited(const std::vector<std::string>& items, size_t limit = 20) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i)
    out += (i ? "; " : "") + items[i];
  if (items.size() > limit)
    out += "; and " + std::to_string(items.size() - limit) + " more";
  return out;
}

} // namespace

/// Text protos are printable; a binary one has control bytes within its first bytes.
bool tf::looks_binary(std::string_view bytes) {
  for (unsigned char c : bytes.substr(0, 4096))
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t')
      return true;
  return false;
}

bool tf::parse_binary(std::string_view bytes, google::protobuf::Message& gd) {
  if (bytes.size() > size_t(INT32_MAX))
    return false;
  // A string field that is not UTF-8 makes protobuf log to stderr; the file is refused with our
  // own error instead.
  google::protobuf::LogSilencer quiet;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), int(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT32_MAX);
  return gd.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

namespace {

/// Collects protobuf's text-format errors (line and column) instead of logging them.
class text_errors : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty())
      first = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
              ": " + message;
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string first;
};

} // namespace

status tf::parse_text(std::string_view text, google::protobuf::Message& gd) {
  std::string kind = gd.GetDescriptor()->name();
  if (looks_binary(text))
    return data_loss("not a text " + kind + " (it holds binary bytes)");
  if (text.size() > size_t(INT32_MAX))
    return resource_exhausted("a text " + kind + " over 2 GiB is not supported");
  google::protobuf::LogSilencer quiet;
  google::protobuf::TextFormat::Parser parser;
  text_errors errors;
  parser.RecordErrorsTo(&errors);
  // Fields this schema does not declare (experimental_debug_info, ...) are skipped.
  parser.AllowUnknownField(true);
  google::protobuf::io::ArrayInputStream in(text.data(), int(text.size()));
  if (!parser.Parse(&in, &gd))
    return data_loss("not a valid text " + kind + ": " +
                     (errors.first.empty() ? std::string("parse error") : errors.first));
  return {};
}

namespace {

/// A v1 Gather (params, indices) is imported as GatherV2 (params, indices, axis): this is the
/// constant axis 0 that goes before it, named after it, now its third input (ahead of any
/// control inputs).
node_def gather_axis(node_def& gather, std::set<std::string, std::less<>>& names) {
  node_def c;
  c.name = gather.name + "/axis";
  for (int i = 1; names.count(c.name); ++i)
    c.name = gather.name + "/axis_" + std::to_string(i);
  names.insert(c.name);
  c.op = "Const";
  c.device = gather.device;
  c.attrs["dtype"] = dtype::i32;
  c.attrs["value"] = tensor::scalar<int32_t>(0);
  auto controls = std::find_if(gather.inputs.begin(), gather.inputs.end(),
                               [](const std::string& in) { return in.starts_with('^'); });
  gather.inputs.insert(controls, c.name);
  return c;
}

} // namespace

result<graph> tf::graph_from_proto(const tensorflow::GraphDef& gd, const op_registry& ops) {
  if (gd.has_library() && gd.library().function_size() > 0) {
    std::vector<std::string> names;
    for (auto& f : gd.library().function())
      names.push_back("'" + f.signature().name() + "'");
    return unimplemented("the graph defines functions, which Runnel does not support: " +
                         join_limited(names));
  }
  bool legacy = !gd.has_versions() || gd.versions().producer() < 21;
  graph_def def;
  std::vector<std::string> unsupported, problems;
  std::set<std::string, std::less<>> names;
  for (auto& n : gd.node())
    names.insert(n.name());
  tf::node_index by_name; // for the ParseExample rewrite's key constants
  if (std::any_of(gd.node().begin(), gd.node().end(),
                  [](auto& n) { return n.op() == "ParseExample"; }))
    for (auto& n : gd.node())
      by_name.emplace(n.name(), &n);
  for (auto& n : gd.node()) {
    if (n.op() == "ParseExample") {
      for (auto& rewritten : tf::rewrite_parse_example(n, by_name, problems))
        def.nodes.push_back(convert_node(rewritten, ops, legacy, unsupported, problems));
      continue;
    }
    node_def d = convert_node(n, ops, legacy, unsupported, problems);
    if (n.op() == "Gather")
      def.nodes.push_back(gather_axis(d, names));
    def.nodes.push_back(std::move(d));
  }
  if (!unsupported.empty())
    return unimplemented(std::to_string(unsupported.size()) + " node" +
                         (unsupported.size() == 1 ? " uses an op" : "s use ops") +
                         " Runnel does not have: " + join_limited(unsupported));
  if (!problems.empty())
    return invalid_argument(join_limited(problems));
  return from_graph_def(def, ops);
}

std::string imported_op_name(std::string_view tf_op) {
  auto it = renamed_ops.find(tf_op);
  return it != renamed_ops.end() ? it->second : std::string(tf_op);
}

bool is_runnel_graph_file(std::string_view bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), "RNLGRAPH", 8) == 0;
}

result<graph> import_tf_graph_def(std::string_view bytes, tf_graph_format format,
                                  const std::string& source, const op_registry& ops) {
  tensorflow::GraphDef gd;
  bool text = format == tf_graph_format::text ||
              (format == tf_graph_format::detect && !bytes.empty() && !tf::looks_binary(bytes));
  if (text) {
    if (auto s = tf::parse_text(bytes, gd); !s.ok())
      return s.with_context(source);
  } else if (!tf::parse_binary(bytes, gd)) {
    return data_loss("not a valid binary GraphDef (" + std::to_string(bytes.size()) +
                     " bytes: truncated, damaged or not a GraphDef)")
        .with_context(source);
  }
  auto g = tf::graph_from_proto(gd, ops);
  if (!g)
    return g.error().with_context(source);
  return g;
}

status tf::parse_message(std::string_view bytes, google::protobuf::Message& m,
                         const std::string& source, const std::string& what,
                         const std::string& file_kind) {
  if (!bytes.empty() && !looks_binary(bytes))
    return parse_text(bytes, m).with_context(source);
  if (!parse_binary(bytes, m))
    return data_loss(source + ": not a valid " + what + " (" + std::to_string(bytes.size()) +
                     " bytes: truncated, damaged or not " + file_kind + ")");
  return {};
}

result<std::string> tf::read_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.empty())
    return data_loss(path + " is empty");
  return bytes;
}

result<graph> import_tf_graph(const std::string& path, const op_registry& ops) {
  RUNNEL_ASSIGN_OR_RETURN(auto bytes, tf::read_model_file(path));
  if (is_runnel_graph_file(bytes))
    return invalid_argument(path + " is a Runnel graph file, not a TensorFlow GraphDef "
                                   "(load it with load_graph)");
  bool text = path.ends_with(".pbtxt") || path.ends_with(".txt");
  return import_tf_graph_def(bytes, text ? tf_graph_format::text : tf_graph_format::detect, path,
                             ops);
}

} // namespace runnel
