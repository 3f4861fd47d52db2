#include "runnel/ops/graph/frames.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace runnel {

loop_frames find_loop_frames(const graph& g, const std::vector<int>& nodes) {
  loop_frames out;
  auto& frames = out.frames;
  frames.resize(1);
  out.frame_of.assign(nodes.size(), 0);
  std::unordered_map<int, size_t> index_of;
  for (size_t i = 0; i < nodes.size(); ++i)
    index_of[nodes[i]] = i;
  std::map<std::pair<int, std::string>, int> by_name; // (enclosing frame, frame_name) -> frame
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    int in = -1; // the frame the node runs in: its first input's (not a loop's back edge)
    for (auto e : n.inputs)
      if (!(n.op == "Merge" && g.at(e.node).op == "NextIteration"))
        if (auto it = index_of.find(e.node); it != index_of.end()) {
          in = out.frame_of[it->second];
          break;
        }
    for (int c : n.control_inputs)
      if (auto it = index_of.find(c); in < 0 && it != index_of.end())
        in = out.frame_of[it->second];
    in = std::max(in, 0);
    int f = in;
    if (n.op == "Enter") {
      auto name = get_attr<std::string>(n.attrs, "frame_name");
      auto [it, added] = by_name.emplace(std::pair{in, name}, int(frames.size()));
      if (added) {
        frames.push_back({name, in, get_attr<int64_t>(n.attrs, "parallel_iterations"), -1, {}, {}});
        frames[size_t(in)].children.push_back(it->second);
      }
      f = it->second;
    } else if (n.op == "Exit") {
      f = frames[size_t(in)].parent;
    } else if (n.op == "LoopCond") {
      frames[size_t(in)].loop_cond = int(i);
    }
    out.frame_of[i] = f;
    frames[size_t(f)].members.push_back(int(i));
  }
  return out;
}

} // namespace runnel
