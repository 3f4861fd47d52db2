// Writes seed inputs for every fuzz target with the project's own writers:
//   fuzz_seeds DIR [TESTDATA]  -> DIR/<target>/seed-*
// With TESTDATA (../shared/testdata), record files written by other software and their records
// are seeds too. scripts/fuzz adds the kept regression inputs.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runnel/net/graph_def.hpp"
#include "runnel/net/wire_frame.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/storage/record_index.hpp"
#include "runnel/storage/tf/events.hpp"
#include "runnel/storage/tf/sstable.hpp"
#include "runnel/storage/tf/tensor_slice.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

fs::path root;
int counter = 0;

void seed(const std::string& target, const std::string& bytes) {
  auto dir = root / target;
  fs::create_directories(dir);
  std::ofstream(dir / ("seed-" + std::to_string(++counter)), std::ios::binary) << bytes;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

feature_map sample_example(int i) {
  feature_map f;
  f["f"].kind = feature_kind::floats;
  f["f"].floats = {1.5f * float(i), 2, 3};
  f["i"].kind = feature_kind::int64s;
  f["i"].int64s = {int64_t(i) << 40};
  f["s"].kind = feature_kind::bytes;
  f["s"].bytes = {"hello", std::string(3, '\0')};
  f["v"].kind = feature_kind::floats;
  f["w"].kind = feature_kind::int64s;
  f["w"].int64s = {1, -2, 3};
  return f;
}

void record_seeds(const fs::path& tmp) {
  // Mode byte (record_reader_fuzz): 0 raw, 1 gzip, 2 zlib, 3 automatic, |4 skip corrupt, 7 index.
  // (ZLIB files come from ../shared/testdata: the writer makes raw and GZIP ones.)
  const std::pair<record_compression, char> kinds[] = {{record_compression::none, 0},
                                                       {record_compression::gzip, 1}};
  for (auto [c, mode] : kinds) {
    auto path = (tmp / "r.tfrecord").string();
    auto w = record_writer::open(path, c).value();
    for (int i = 0; i < 3; ++i)
      throw_if_error(w.write(encode_example(sample_example(i))));
    throw_if_error(w.close());
    auto bytes = slurp(path);
    seed("record_reader", std::string(1, mode) + bytes);
    seed("record_reader", std::string(1, char(mode | 4)) + bytes);
    seed("record_reader", std::string(1, char(3)) + bytes);
  }
  // An index sidecar of the fuzz target's own 3-record file.
  auto good = (tmp / "good.tfrecord").string();
  auto w = record_writer::open(good).value();
  for (int i = 0; i < 3; ++i)
    throw_if_error(w.write("record " + std::to_string(i)));
  throw_if_error(w.close());
  throw_if_error(write_record_index(good).error());
  seed("record_reader", std::string(1, char(7)) + slurp(record_index_path(good)));
}

void example_seeds() {
  for (int i = 0; i < 3; ++i)
    seed("example", encode_example(sample_example(i)));
  sequence_example s;
  s.context["len"].kind = feature_kind::int64s;
  s.context["len"].int64s = {2};
  feature tok;
  tok.kind = feature_kind::int64s;
  tok.int64s = {4, 5};
  s.feature_lists["tokens"] = {tok, tok};
  feature words;
  words.kind = feature_kind::bytes;
  words.bytes = {"a", "bc"};
  s.feature_lists["words"] = {words};
  seed("example", encode_sequence_example(s));
}

void graph_seeds() {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 3}, "x");
  auto w = variable(g, constant(g, {{1.f}, {2.f}, {3.f}}), "w");
  auto y = matmul(x, w.value);
  auto loss = mean(square(y));
  (void)loss;
  seed("graph_def", serialize_graph(g));
  graph h;
  auto s = constant(h, std::string("text"));
  (void)identity(s, "id");
  seed("graph_def", serialize_graph(h));
}

void interop_seeds(const fs::path& tmp) {
  // GraphDefs, binary and text, of a small model.
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 3}, "x");
  auto w = constant(g, tensor::from_values<float>({3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  auto y = softmax(matmul(x, w), "y");
  (void)argmax(y, 1);
  seed("tf_graph", export_tf_graph_def(g, tf_graph_format::binary));
  seed("tf_graph", export_tf_graph_def(g, tf_graph_format::text));
  // Event records: the writer's file, cut into its records.
  auto writer = summary_writer::open((tmp / "logs").string(), 60).value();
  throw_if_error(writer.add_graph(g));
  throw_if_error(writer.add_scalar("loss", 0.25, 7));
  graph h;
  auto v = constant(h, tensor::vector<float>({1, 2, 3, -4}), "v");
  auto hist = histogram_summary("v", v);
  auto text = text_summary("t", constant(h, tensor::scalar(std::string("hello")), "s"));
  (void)hist;
  (void)text;
  throw_if_error(writer.close());
  auto r = record_reader::open(writer.path()).value();
  std::string rec;
  while (r.next(rec).value())
    seed("events", rec);
  // TensorFlow checkpoint indexes: one block, and many snappy blocks.
  std::map<std::string, tensor> ckpt{
      {"dense/kernel", tensor::from_values<float>({2, 2}, {1, 2, 3, 4})},
      {"global_step", tensor::scalar<int64_t>(7)},
      {"vocab", tensor::vector<std::string>({"a", "bc"})}};
  throw_if_error(write_tf_checkpoint((tmp / "ckpt" / "model").string(), ckpt));
  seed("tf_checkpoint", slurp(tmp / "ckpt" / "model.index"));
  tf::table_builder many({.block_size = 64, .restart_interval = 2, .snappy = true});
  auto rows = tf::read_table(slurp(tmp / "ckpt" / "model.index"), "model.index").value();
  for (auto& [key, value] : rows)         // a named local: a range-for over .value() of a temporary
    throw_if_error(many.add(key, value)); // would read the result after it is destroyed
  seed("tf_checkpoint", many.finish());
  // ... and one holding a slice of a partitioned variable under its OrderedCode key.
  tf::table_builder sliced;
  throw_if_error(sliced.add(rows.at(0).first, rows.at(0).second)); // the header
  throw_if_error(
      sliced.add(tf::encode_slice_key("dense/kernel", {{0, 1}, {0, -1}}), rows.at(1).second));
  for (size_t i = 1; i < rows.size(); ++i)
    throw_if_error(sliced.add(rows[i].first, rows[i].second));
  seed("tf_checkpoint", sliced.finish());
  // A MetaGraphDef in text form: a variable, its VariableDef collection, a saver's scope.
  seed("tf_meta_graph",
       "graph_def { node { name: \"w\" op: \"VariableV2\" attr { key: \"dtype\" value { type: "
       "DT_FLOAT } } attr { key: \"shape\" value { shape { dim { size: 2 } } } } }\n"
       "node { name: \"save/Const\" op: \"Const\" attr { key: \"dtype\" value { type: "
       "DT_STRING } } attr { key: \"value\" value { tensor { dtype: DT_STRING string_val: "
       "\"m\" } } } }\n"
       "node { name: \"save/RestoreV2\" op: \"RestoreV2\" input: \"save/Const\" } }\n"
       "saver_def { restore_op_name: \"save/restore_all\" }\n"
       "collection_def { key: \"variables\" value { bytes_list { value: \"\\n\\003w:0\" } } }\n"
       "signature_def { key: \"serving_default\" value { inputs { key: \"w\" value { name: "
       "\"w:0\" dtype: DT_FLOAT } } method_name: \"tensorflow/serving/predict\" } }\n");
  // A SavedModel in text form: a {serve} MetaGraph with a saver's RestoreV2 keys, a legacy
  // init op and a ParseExample with two sparse features (rewritten with an IdentityN).
  seed(
      "tf_saved_model",
      "meta_graphs { meta_info_def { tags: \"serve\" } graph_def {\n"
      "node { name: \"w\" op: \"VariableV2\" attr { key: \"dtype\" value { type: DT_FLOAT } } "
      "attr { key: \"shape\" value { shape { dim { size: 2 } } } } }\n"
      "node { name: \"init\" op: \"NoOp\" }\n"
      "node { name: \"save/names\" op: \"Const\" attr { key: \"value\" value { tensor { "
      "dtype: DT_STRING string_val: \"dense/w\" } } } }\n"
      "node { name: \"save/slices\" op: \"Const\" attr { key: \"value\" value { tensor { "
      "dtype: DT_STRING string_val: \"\" } } } }\n"
      "node { name: \"save/RestoreV2\" op: \"RestoreV2\" input: \"save/Const\" input: "
      "\"save/names\" input: \"save/slices\" }\n"
      "node { name: \"save/Assign\" op: \"Assign\" input: \"w\" input: \"save/RestoreV2:0\" }\n"
      "node { name: \"s\" op: \"Placeholder\" attr { key: \"dtype\" value { type: DT_STRING } } }\n"
      "node { name: \"k0\" op: \"Const\" attr { key: \"dtype\" value { type: DT_STRING } } "
      "attr { key: \"value\" value { tensor { dtype: "
      "DT_STRING string_val: \"a\" } } } }\n"
      "node { name: \"k1\" op: \"Const\" attr { key: \"dtype\" value { type: DT_STRING } } "
      "attr { key: \"value\" value { tensor { dtype: "
      "DT_STRING string_val: \"b\" } } } }\n"
      "node { name: \"p\" op: \"ParseExample\" input: \"s\" input: \"k0\" input: \"k0\" input: "
      "\"k1\" attr { key: \"Nsparse\" value { i: 2 } } attr { key: \"Ndense\" value { i: 0 } } "
      "attr { key: \"sparse_types\" value { list { type: DT_INT64 type: DT_STRING } } } "
      "attr { key: \"Tdense\" value { list { } } } attr { key: \"dense_shapes\" value { list "
      "{ } } } } }\n"
      "saver_def { restore_op_name: \"save/restore_all\" }\n"
      "collection_def { key: \"legacy_init_op\" value { node_list { value: \"init\" } } }\n"
      "signature_def { key: \"serving_default\" value { inputs { key: \"s\" value { name: "
      "\"s:0\" dtype: DT_STRING } } outputs { key: \"v\" value { name: \"p:2\" dtype: "
      "DT_INT64 } } } } }\n");
  // NumPy arrays.
  seed("npy", serialize_npy(tensor::from_values<float>({2, 2}, {1, 2, 3, 4})).value());
  seed("npy", serialize_npy(tensor::vector<int64_t>({7, 8})).value());
  seed("npy", serialize_npy(tensor::scalar<bool>(true)).value());
  // Keras configs: Sequential (Keras 2) and functional (Keras 3).
  seed("keras_config",
       R"({"class_name": "Sequential", "config": {"name": "s", "layers": [)"
       R"({"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [null, 4]}},)"
       R"({"class_name": "Dense", "config": {"name": "dense", "units": 4, "activation": "relu"}},)"
       R"({"class_name": "BatchNormalization", "config": {"name": "batch_normalization"}},)"
       R"({"class_name": "Dropout", "config": {"name": "d", "rate": 0.5}}]}})");
  seed("keras_config",
       R"({"class_name": "Sequential", "config": {"name": "r", "layers": [)"
       R"({"class_name": "Embedding", "config": {"name": "embedding", "batch_input_shape": [null, 5]}},)"
       R"({"class_name": "LSTM", "config": {"name": "lstm", "units": 4, "return_sequences": true}},)"
       R"({"class_name": "GRU", "config": {"name": "gru", "units": 4, "reset_after": true}}]}})");
  seed("keras_config",
       R"({"class_name": "Functional", "config": {"name": "f", "layers": [)"
       R"({"class_name": "InputLayer", "name": "in", "config": {"name": "in", "batch_shape": [null, 6, 6, 1]}},)"
       R"({"class_name": "Conv2D", "name": "conv2d", "config": {"name": "conv2d", "filters": 4,)"
       R"( "kernel_size": [3, 3], "padding": "same"}, "inbound_nodes": [{"args": [{"class_name":)"
       R"( "__keras_tensor__", "config": {"keras_history": ["in", 0, 0]}}], "kwargs": {}}]},)"
       R"({"class_name": "MaxPooling2D", "name": "p", "config": {"name": "p"}, "inbound_nodes":)"
       R"( [[["conv2d", 0, 0, {}]]]}, {"class_name": "Flatten", "name": "fl", "config": {"name": "fl"},)"
       R"( "inbound_nodes": [[["p", 0, 0, {}]]]}], "input_layers": [["in", 0, 0]],)"
       R"( "output_layers": [["fl", 0, 0]]}})");
}

void wire_seeds() {
  seed("wire", std::string(1, char(1)) + net::make_preamble(net::conn_kind::rpc, "s3cret-token"));
  seed("wire", std::string(1, char(1)) + net::make_preamble(net::conn_kind::data, ""));
  seed("wire", std::string(1, char(1)) + net::make_preamble(net::conn_kind::step, "t"));
  seed("wire", std::string(1, char(1)) + net::make_preamble(net::conn_kind::data_shm, ""));
  auto frame = [](net::frame_header h) {
    auto bytes = net::encode_frame_header(h);
    seed("wire", std::string(1, char(0)) + bytes.substr(4)); // the header words, as decoded
  };
  net::frame_header h;
  h.step = 42;
  h.key = "edge_1_x;0:0";
  h.type = dtype::f32;
  h.shape = shape{2, 3};
  h.payload_bytes = 24;
  frame(h);
  h.bf16 = true;
  h.payload_bytes = 12;
  frame(h);
  h.bf16 = false;
  h.payload_bytes = 24;
  h.in_shm = true; // the payload in the sender's shared-memory ring
  h.shm_pos = 1 << 20;
  frame(h);
  net::frame_header s;
  s.key = "strings";
  s.type = dtype::string;
  s.shape = shape{2};
  s.string_value = tensor::vector<std::string>({"a", "bc"});
  frame(s);
  // Step messages (mode 2): a traced run_graph call with a number and a string feed, and a reply.
  auto step = [](const net::step_message& m) {
    seed("wire", std::string(1, char(2)) + net::encode_step_message(m).head.substr(4));
  };
  net::step_message call;
  call.call_id = 9;
  call.kind = net::step_call::run_graph;
  call.handle = "partition-1";
  call.step_id = 77;
  call.tensors = {{"x", tensor::from_values<float>(shape{2}, {1, 2})},
                  {"s", tensor::vector<std::string>({"a"})}};
  call.fetches = {"y:0"};
  call.trace = true;
  step(call);
  net::step_message reply;
  reply.call_id = 9;
  reply.kind = net::step_call::run_graph_reply;
  reply.error = invalid_argument("node 'y' (op Add): shapes differ");
  reply.record.nodes.push_back({"y", "Add", "/job:w/task:0/device:CPU:0", 1, 2, 8});
  reply.record.received_ns = 5;
  step(reply);
}

void checkpoint_seeds(const fs::path& tmp) {
  auto path = (tmp / "c.h5").string();
  std::map<std::string, tensor> t;
  t.emplace("w", tensor::vector<float>({1, 2, 3}));
  t.emplace("layer/b", tensor::scalar<double>(0.5));
  t.emplace("names", tensor::vector<std::string>({"x", "yz"}));
  throw_if_error(write_checkpoint(path, t, 7));
  seed("checkpoint", slurp(path));
}

/// Files written by other software: each record file as a record_reader seed (automatic mode),
/// and its first records as example seeds.
void testdata_seeds(const fs::path& dir) {
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.file_size() > (1 << 20))
      continue;
    auto name = e.path().filename().string();
    if (name.find("tfrecord") == std::string::npos)
      continue;
    seed("record_reader", std::string(1, char(3)) + slurp(e.path()));
    auto r = record_reader::open(e.path().string());
    if (!r)
      continue;
    std::string rec;
    for (int i = 0; i < 3; ++i) {
      auto more = r->next(rec);
      if (!more || !*more)
        break;
      seed("example", rec);
    }
  }
}

void cluster_seeds() {
  seed("cluster_spec", "ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224");
  seed("cluster_spec", "# a file\nps=10.0.0.1:2222\nworker=host-a:2222,[::1]:2223\n");
  seed("cluster_spec", "/job:worker/replica:0/task:3/device:CPU:0");
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR [TESTDATA_DIR]\n");
    return 2;
  }
  root = argv[1];
  auto tmp = root / ".tmp";
  fs::create_directories(tmp);
  record_seeds(tmp);
  example_seeds();
  graph_seeds();
  wire_seeds();
  interop_seeds(tmp);
  checkpoint_seeds(tmp);
  cluster_seeds();
  if (argc == 3)
    testdata_seeds(argv[2]);
  fs::remove_all(tmp);
  std::printf("fuzz_seeds: %d seeds in %s\n", counter, root.c_str());
  return 0;
}
