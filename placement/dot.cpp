#include "runnel/placement/dot.hpp"

#include <functional>
#include <map>
#include <numeric>

#include "runnel/ops/graph/frames.hpp"

namespace runnel {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

const char* palette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3",
                         "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd"};

} // namespace

std::string to_dot(const graph& g, const std::vector<std::string>* device_of_node) {
  std::map<std::string, std::string> color; // device -> fill color, in order of appearance
  auto device_of = [&](int v) {
    if (device_of_node && size_t(v) < device_of_node->size())
      return (*device_of_node)[size_t(v)];
    return g.at(v).device;
  };
  std::vector<int> all(size_t(g.num_nodes()));
  std::iota(all.begin(), all.end(), 0);
  auto frames = find_loop_frames(g, all).frames; // node index = node id here
  std::vector<std::string> node_lines(size_t(g.num_nodes()));
  std::string edges;
  for (int v = 0; v < g.num_nodes(); ++v) {
    const node& n = g.at(v);
    std::string dev = device_of(v);
    if (!color.count(dev))
      color[dev] = palette[color.size() % (sizeof palette / sizeof *palette)];
    node_lines[size_t(v)] = "n" + std::to_string(v) + " [label=\"" + escape(n.name) + "\\n" +
                            escape(n.op) + "\", fillcolor=\"" + color[dev] + "\", tooltip=\"" +
                            escape(dev.empty() ? "(no device)" : dev) + "\"];\n";
    for (auto e : n.inputs) {
      auto& s = g.at(e.node).output_shapes[size_t(e.index)];
      // A loop's back edge does not pull the Merge below the NextIteration.
      bool back = n.op == "Merge" && g.at(e.node).op == "NextIteration";
      edges += "  n" + std::to_string(e.node) + " -> n" + std::to_string(v) + " [label=\"" +
               escape(s.to_string()) + "\"" + (back ? ", constraint=false, color=\"#1f78b4\"" : "") +
               "];\n";
    }
    for (int c : n.control_inputs)
      edges += "  n" + std::to_string(c) + " -> n" + std::to_string(v) + " [style=dashed];\n";
  }
  // Frames as nested clusters (a while loop's nodes inside a dashed box named by its frame).
  std::function<void(int, const std::string&, std::string&)> emit =
      [&](int f, const std::string& indent, std::string& out) {
        for (int v : frames[size_t(f)].members)
          out += indent + node_lines[size_t(v)];
        for (int c : frames[size_t(f)].children) {
          out += indent + "subgraph cluster_frame" + std::to_string(c) + " {\n" + indent +
                 "  label=\"frame " + escape(frames[size_t(c)].name) + "\";\n" + indent +
                 "  style=dashed;\n";
          emit(c, indent + "  ", out);
          out += indent + "}\n";
        }
      };
  std::string nodes;
  emit(0, "  ", nodes);
  std::string legend = "  subgraph cluster_legend {\n    label=\"devices\";\n";
  int i = 0;
  for (auto& [dev, c] : color)
    legend += "    legend" + std::to_string(i++) + " [label=\"" +
              escape(dev.empty() ? "(no device)" : dev) + "\", fillcolor=\"" + c + "\"];\n";
  legend += "  }\n";
  return "digraph runnel {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", "
         "fontname=\"Helvetica\"];\n  edge [fontsize=9];\n" +
         nodes + edges + legend + "}\n";
}

} // namespace runnel
