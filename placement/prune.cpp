#include "runnel/placement/prune.hpp"

#include <algorithm>

namespace runnel {

std::vector<char> prune(const graph& g, const std::vector<int>& roots,
                        const std::vector<endpoint>& fed) {
  auto is_fed = [&](endpoint e) { return std::find(fed.begin(), fed.end(), e) != fed.end(); };
  std::vector<char> needed(size_t(g.num_nodes()), 0);
  std::vector<int> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (needed[size_t(v)])
      continue;
    needed[size_t(v)] = 1;
    auto& nd = g.at(v);
    for (auto e : nd.inputs)
      if (!is_fed(e))
        stack.push_back(e.node);
    for (int c : nd.control_inputs)
      stack.push_back(c);
  }
  return needed;
}

} // namespace runnel
