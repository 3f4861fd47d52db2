// TensorFlow 1.x's dynamic_rnn graphs, frozen: written by tests/tf/make_tf_dynamic_rnn.py node for
// node as TensorFlow lays them out (TensorArrayV3 handles entering while frames as resources, both
// loop layouts, BasicRNNCell, GRUCell, BasicLSTMCell, LSTMBlockCell, GRUBlockCellV2, LSTMCell with
// peepholes, clipping and a projection, MultiRNNCell, bidirectional RNNs with and without
// sequence_length), imported, run on a batch whose size the graph learns at run time, and compared
// with NumPy's recurrence computed from the same constants.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runnel/actors/exec/session.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

using namespace runnel;
namespace fs = std::filesystem;

namespace {

const fs::path& rnn_files() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("runnel-tfrnn-" + std::to_string(::getpid()));
    std::string cmd =
        "/usr/bin/python3 " RUNNEL_SOURCE_DIR "/tests/tf/make_tf_dynamic_rnn.py " + d.string();
    if (int rc = std::system(cmd.c_str()); rc != 0)
      FAIL("make_tf_dynamic_rnn.py failed (status " << rc << ")");
    std::atexit([] {
      fs::remove_all(fs::temp_directory_path() / ("runnel-tfrnn-" + std::to_string(::getpid())));
    });
    return d;
  }();
  return dir;
}

std::vector<std::string> fetches_of(const std::string& name) {
  std::ifstream in(rnn_files() / (name + ".fetches"));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      out.push_back(line);
  return out;
}

/// Runs graph `name` on the first `rows` rows of x and compares every fetch with NumPy's.
void check_graph(const std::string& name, int64_t rows) {
  INFO(name << " on " << rows << " rows");
  auto g = import_tf_graph((rnn_files() / (name + ".pbtxt")).string());
  INFO(g.error().to_string());
  REQUIRE(g.ok());
  auto x = read_npy((rnn_files() / "x.npy").string()).value().slice(0, rows);
  named_feed_list feeds{{"x", x}};
  if (auto lengths = rnn_files() / (name + ".seq_len.npy"); fs::exists(lengths))
    feeds.emplace_back("seq_len", read_npy(lengths.string()).value().slice(0, rows));
  auto fetches = fetches_of(name);
  REQUIRE(fetches.size() >= 2);
  runtime rt;
  session s(rt, *g);
  auto got = s.run(feeds, fetches);
  INFO(got.error().to_string());
  REQUIRE(got.ok());
  for (size_t k = 0; k < fetches.size(); ++k) {
    INFO("fetch " << fetches[k]);
    auto want =
        read_npy((rnn_files() / (name + ".expected_" + std::to_string(k) + ".npy")).string())
            .value()
            .slice(0, rows);
    const tensor& t = got->at(k);
    REQUIRE(t.shape() == want.shape());
    double worst = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i)
      worst = std::max(worst, double(std::abs(t.data<float>()[i] - want.data<float>()[i])));
    CHECK(worst < 1e-5);
  }
}

} // namespace

TEST_CASE("dynamic_rnn(BasicRNNCell) in TensorFlow 1.12+'s loop layout runs as TensorFlow's",
          "[tf][rnn]") {
  check_graph("basic_rnn", 2);
  check_graph("basic_rnn", 1); // the zero state's batch comes from the fed input
}

TEST_CASE("dynamic_rnn(GRUCell) in TensorFlow 1.5's loop layout runs as TensorFlow's",
          "[tf][rnn]") {
  check_graph("gru_v15", 2);
}

TEST_CASE("dynamic_rnn(BasicLSTMCell) with its (c, h) state runs as TensorFlow's", "[tf][rnn]") {
  check_graph("basic_lstm", 2);
}

TEST_CASE("dynamic_rnn(LSTMBlockCell): the block op inside TensorFlow's loop", "[tf][rnn]") {
  check_graph("lstm_block", 2);
}

TEST_CASE("dynamic_rnn(GRUBlockCellV2): the GRUBlockCell op inside TensorFlow's loop",
          "[tf][rnn]") {
  check_graph("gru_block", 2);
}

TEST_CASE("dynamic_rnn(LSTMCell) with peepholes, cell and projection clipping and a projection",
          "[tf][rnn]") {
  check_graph("lstm_peephole_projection", 2); // an output and h of 3, a cell state of 4
}

TEST_CASE("dynamic_rnn(MultiRNNCell([GRUCell, BasicLSTMCell])): stacked cells in one frame",
          "[tf][rnn]") {
  check_graph("stacked", 2);
}

TEST_CASE("bidirectional_dynamic_rnn: two frames in one graph, the backward over ReverseV2",
          "[tf][rnn]") {
  check_graph("bidirectional", 2);
  check_graph("bidirectional", 1);
}

TEST_CASE("bidirectional_dynamic_rnn with sequence_length: ReverseSequence, states held past "
          "each row's length",
          "[tf][rnn]") {
  check_graph("bidirectional_lengths", 2);
  check_graph("bidirectional_lengths", 1);
  // The graph's own check of sequence_length's shape (an Assert) names the tensor (the forward
  // RNN alone is fetched: the backward's ReverseSequence would refuse the lengths too).
  auto g = import_tf_graph((rnn_files() / "bidirectional_lengths.pbtxt").string()).value();
  runtime rt;
  session s(rt, g);
  auto x = read_npy((rnn_files() / "x.npy").string()).value();
  auto r = s.run(named_feed_list{{"x", x}, {"seq_len", tensor::vector<int32_t>({3})}},
                 {"bidirectional_rnn/fw/fw/transpose_1"});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(
      r.error().to_string(),
      Catch::Contains("Expected shape for Tensor bidirectional_rnn/fw/fw/sequence_length:0"));
}
