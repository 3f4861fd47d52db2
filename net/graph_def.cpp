#include "runnel/net/graph_def.hpp"

#include "runnel/ops/core/atomic_file.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "net/graph.capnp.h"
#include "runnel/net/tensor_codec.hpp"

namespace runnel {
namespace {

constexpr char magic[8] = {'R', 'N', 'L', 'G', 'R', 'A', 'P', 'H'};
constexpr size_t header_size = 16;

void write_attr(wire::Attr::Builder b, const std::string& key, const attr_value& v) {
  b.setName(key);
  auto val = b.initValue();
  auto bytes = [](const std::string& s) {
    return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
  };
  struct visitor {
    wire::Attr::Value::Builder& val;
    decltype(bytes)& to_bytes;
    void operator()(int64_t i) { val.setI(i); }
    void operator()(double d) { val.setF(d); }
    void operator()(bool x) { val.setB(x); }
    void operator()(const std::string& s) { val.setS(to_bytes(s)); }
    void operator()(dtype t) { val.setType(net::to_wire(t)); }
    void operator()(const shape& s) { net::write_shape(val.initShape(), s); }
    void operator()(const tensor& t) { net::write_tensor(val.initTensor(), t); }
    void operator()(const std::vector<int64_t>& l) {
      auto out = val.initListI(unsigned(l.size()));
      for (unsigned i = 0; i < l.size(); ++i)
        out.set(i, l[i]);
    }
    void operator()(const std::vector<double>& l) {
      auto out = val.initListF(unsigned(l.size()));
      for (unsigned i = 0; i < l.size(); ++i)
        out.set(i, l[i]);
    }
    void operator()(const std::vector<dtype>& l) {
      auto out = val.initListType(unsigned(l.size()));
      for (unsigned i = 0; i < l.size(); ++i)
        out.set(i, net::to_wire(l[i]));
    }
    void operator()(const std::vector<std::string>& l) {
      auto out = val.initListS(unsigned(l.size()));
      for (unsigned i = 0; i < l.size(); ++i)
        out.set(i, to_bytes(l[i]));
    }
    void operator()(const std::vector<shape>& l) {
      auto out = val.initListShape(unsigned(l.size()));
      for (unsigned i = 0; i < l.size(); ++i)
        net::write_shape(out[i], l[i]);
    }
  };
  std::visit(visitor{val, bytes}, v);
}

result<attr_value> read_attr(wire::Attr::Value::Reader v) {
  auto str = [](capnp::Data::Reader d) {
    return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
  };
  switch (v.which()) {
    case wire::Attr::Value::I:
      return attr_value(v.getI());
    case wire::Attr::Value::F:
      return attr_value(v.getF());
    case wire::Attr::Value::B:
      return attr_value(v.getB());
    case wire::Attr::Value::S:
      return attr_value(str(v.getS()));
    case wire::Attr::Value::TYPE: {
      RUNNEL_ASSIGN_OR_RETURN(dtype t, net::from_wire(v.getType()));
      return attr_value(t);
    }
    case wire::Attr::Value::SHAPE: {
      RUNNEL_ASSIGN_OR_RETURN(shape s, net::read_shape(v.getShape()));
      return attr_value(std::move(s));
    }
    case wire::Attr::Value::TENSOR: {
      RUNNEL_ASSIGN_OR_RETURN(tensor t, net::read_tensor(v.getTensor()));
      return attr_value(std::move(t));
    }
    case wire::Attr::Value::LIST_I: {
      std::vector<int64_t> l;
      for (auto x : v.getListI())
        l.push_back(x);
      return attr_value(std::move(l));
    }
    case wire::Attr::Value::LIST_F: {
      std::vector<double> l;
      for (auto x : v.getListF())
        l.push_back(x);
      return attr_value(std::move(l));
    }
    case wire::Attr::Value::LIST_TYPE: {
      std::vector<dtype> l;
      for (auto t : v.getListType()) {
        RUNNEL_ASSIGN_OR_RETURN(dtype d, net::from_wire(t));
        l.push_back(d);
      }
      return attr_value(std::move(l));
    }
    case wire::Attr::Value::LIST_S: {
      std::vector<std::string> l;
      for (auto s : v.getListS())
        l.push_back(str(s));
      return attr_value(std::move(l));
    }
    case wire::Attr::Value::LIST_SHAPE: {
      std::vector<shape> l;
      for (auto s : v.getListShape()) {
        RUNNEL_ASSIGN_OR_RETURN(shape x, net::read_shape(s));
        l.push_back(std::move(x));
      }
      return attr_value(std::move(l));
    }
  }
  return invalid_argument("unknown attribute kind " + std::to_string(int(v.which())));
}

result<graph_def> read_message(const kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = std::max<uint64_t>(words.size() * 4, 1 << 20);
  capnp::FlatArrayMessageReader message(words, options);
  auto root = message.getRoot<wire::GraphDef>();
  graph_def def;
  for (auto n : root.getNodes()) {
    node_def d;
    d.name = n.getName();
    d.op = n.getOp();
    d.device = n.getDevice();
    for (auto in : n.getInputs())
      d.inputs.emplace_back(in);
    for (auto a : n.getAttrs()) {
      auto v = read_attr(a.getValue());
      if (!v)
        return v.error().with_context("node '" + d.name + "' (op " + d.op + "): attribute '" +
                                      std::string(a.getName().cStr()) + "'");
      d.attrs.emplace(std::string(a.getName()), std::move(v).value());
    }
    def.nodes.push_back(std::move(d));
  }
  for (auto c : root.getCollections()) {
    auto& list = def.collections[c.getName()];
    for (auto name : c.getNodes())
      list.emplace_back(name);
  }
  if (root.getHasSeed())
    def.seed = root.getSeed();
  return def;
}

} // namespace

std::string serialize_graph_def(const graph_def& def) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<wire::GraphDef>();
  auto nodes = root.initNodes(unsigned(def.nodes.size()));
  for (unsigned i = 0; i < def.nodes.size(); ++i) {
    const node_def& d = def.nodes[i];
    auto b = nodes[i];
    b.setName(d.name);
    b.setOp(d.op);
    b.setDevice(d.device);
    auto inputs = b.initInputs(unsigned(d.inputs.size()));
    for (unsigned k = 0; k < d.inputs.size(); ++k)
      inputs.set(k, d.inputs[k]);
    auto attrs = b.initAttrs(unsigned(d.attrs.size()));
    unsigned k = 0;
    for (auto& [key, v] : d.attrs)
      write_attr(attrs[k++], key, v);
  }
  auto cols = root.initCollections(unsigned(def.collections.size()));
  unsigned c = 0;
  for (auto& [name, list] : def.collections) {
    cols[c].setName(name);
    auto out = cols[c].initNodes(unsigned(list.size()));
    for (unsigned k = 0; k < list.size(); ++k)
      out.set(k, list[k]);
    ++c;
  }
  if (def.seed) {
    root.setHasSeed(true);
    root.setSeed(*def.seed);
  }
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  std::string out(header_size, '\0');
  std::memcpy(out.data(), magic, 8);
  uint32_t version = graph_format_version;
  std::memcpy(out.data() + 8, &version, 4);
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  return out;
}

std::string serialize_graph(const graph& g) {
  return serialize_graph_def(to_graph_def(g));
}

result<graph_def> parse_graph_def(std::string_view bytes, const std::string& source) {
  auto fail = [&](status s) { return s.with_context(source); };
  if (bytes.size() < header_size || std::memcmp(bytes.data(), magic, 8) != 0)
    return fail(data_loss("not a Runnel graph file (the first 8 bytes are not \"RNLGRAPH\")"));
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != graph_format_version)
    return fail(unimplemented("graph format version " + std::to_string(version) +
                              " is not supported (this build reads version " +
                              std::to_string(graph_format_version) + ")"));
  auto body = bytes.substr(header_size);
  if (body.size() % sizeof(capnp::word) != 0)
    return fail(data_loss("truncated: the message is " + std::to_string(body.size()) +
                          " bytes, not a whole number of 8-byte words"));
  auto words = kj::heapArray<capnp::word>(body.size() / sizeof(capnp::word));
  if (!body.empty())
    std::memcpy(words.begin(), body.data(), body.size());
  try {
    auto def = read_message(words.asPtr());
    if (!def)
      return fail(def.error());
    return def;
  } catch (const kj::Exception& e) {
    return fail(data_loss("malformed graph message: " + std::string(e.getDescription().cStr())));
  }
}

result<graph> parse_graph(std::string_view bytes, const op_registry& ops,
                          const std::string& source) {
  RUNNEL_ASSIGN_OR_RETURN(graph_def def, parse_graph_def(bytes, source));
  auto g = from_graph_def(def, ops);
  if (!g)
    return g.error().with_context(source);
  return g;
}

status save_graph(const graph& g, const std::string& path) {
  return write_file_atomically(path, serialize_graph(g)); // write, fsync, rename
}

result<graph> load_graph(const std::string& path, const op_registry& ops) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("cannot open graph file " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_graph(ss.str(), ops, path);
}

} // namespace runnel
