// The rewritable graph's queries and edits (ops/optimize/rewrite.hpp).
#include "runnel/ops/optimize/rewrite.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <queue>

namespace runnel::optimize {

std::vector<std::vector<std::pair<int, int>>> rgraph::consumers() const {
  std::vector<std::vector<std::pair<int, int>>> out(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v)
    if (!nodes[v].dead)
      for (size_t s = 0; s < nodes[v].inputs.size(); ++s)
        out[size_t(nodes[v].inputs[s].node)].emplace_back(int(v), int(s));
  return out;
}

std::vector<std::pair<int, int>>
rgraph::readers(const std::vector<std::vector<std::pair<int, int>>>& consumers, int v) const {
  std::vector<std::pair<int, int>> out;
  for (auto [w, slot] : consumers[size_t(v)])
    if (!nodes[size_t(w)].dead && size_t(slot) < nodes[size_t(w)].inputs.size() &&
        nodes[size_t(w)].inputs[size_t(slot)].node == v &&
        std::find(out.begin(), out.end(), std::make_pair(w, slot)) == out.end())
      out.emplace_back(w, slot);
  return out;
}

std::vector<std::vector<int>> rgraph::control_consumers() const {
  std::vector<std::vector<int>> out(nodes.size());
  for (size_t v = 0; v < nodes.size(); ++v)
    if (!nodes[v].dead)
      for (int c : nodes[v].control_inputs)
        out[size_t(c)].push_back(int(v));
  return out;
}

bool rgraph::is_fetched(endpoint e) const {
  return std::find(signature.fetches.begin(), signature.fetches.end(), e) !=
         signature.fetches.end();
}

bool rgraph::is_fed(int v) const {
  if (fed[size_t(v)])
    return true;
  return std::any_of(signature.feeds.begin(), signature.feeds.end(),
                     [v](endpoint e) { return e.node == v; });
}

bool rgraph::is_kept(int v) const {
  if (fed[size_t(v)])
    return true;
  for (auto e : signature.fetches)
    if (e.node == v)
      return true;
  for (auto e : signature.feeds)
    if (e.node == v)
      return true;
  return std::find(signature.targets.begin(), signature.targets.end(), v) !=
         signature.targets.end();
}

void rgraph::replace_uses(endpoint from, endpoint to,
                          std::vector<std::vector<std::pair<int, int>>>& consumers) {
  auto& list = consumers[size_t(from.node)];
  std::vector<std::pair<int, int>> rest;
  for (auto [w, slot] : list) {
    auto& in = nodes[size_t(w)].inputs;
    if (!nodes[size_t(w)].dead && size_t(slot) < in.size() && in[size_t(slot)] == from) {
      in[size_t(slot)] = to;
      consumers[size_t(to.node)].emplace_back(w, slot);
    } else {
      rest.emplace_back(w, slot);
    }
  }
  consumers[size_t(from.node)] = std::move(rest);
  for (auto& e : signature.fetches)
    if (e == from)
      e = to;
}

void rgraph::replace_waits(int from, int to, std::vector<std::vector<int>>& control) {
  for (int w : control[size_t(from)]) {
    auto& ci = nodes[size_t(w)].control_inputs;
    bool has = std::find(ci.begin(), ci.end(), to) != ci.end();
    if (has)
      ci.erase(std::remove(ci.begin(), ci.end(), from), ci.end());
    else
      std::replace(ci.begin(), ci.end(), from, to);
    if (!has)
      control[size_t(to)].push_back(w);
  }
  control[size_t(from)].clear();
}

const std::string& rgraph::placed(int v) const {
  static const std::string none;
  int o = nodes[size_t(v)].origin;
  if (o < 0 || size_t(o) >= context->device_of_node.size())
    return none;
  return context->device_of_node[size_t(o)];
}

bool rgraph::on_cpu(int v) const {
  // By where it is placed, else by what it asks for; device types in either case.
  std::string d = placed(v).empty() ? nodes[size_t(v)].device : placed(v);
  for (auto& ch : d)
    ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return d.find("gpu") == std::string::npos;
}

const tensor* rgraph::constant(int v) const {
  const rnode& n = nodes[size_t(v)];
  if (n.dead || n.op != "Const" || !n.control_inputs.empty() || is_fed(v))
    return nullptr;
  auto it = n.attrs.find("value");
  return it == n.attrs.end() ? nullptr : std::get_if<tensor>(&it->second);
}

void rgraph::kill(int v) {
  if (!nodes[size_t(v)].dead) {
    nodes[size_t(v)].dead = true;
    ++removed;
  }
}

bool attrs_equal(const attr_map& a, const attr_map& b) {
  if (a.size() != b.size())
    return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.index() != ib->second.index())
      return false;
    if (auto* ta = std::get_if<tensor>(&ia->second)) {
      auto& tb = std::get<tensor>(ib->second);
      if (ta->type() != tb.type() || ta->shape() != tb.shape())
        return false;
      if (ta->raw_data() == tb.raw_data())
        continue;
      if (ta->type() == dtype::string || ta->bytes() != tb.bytes() ||
          std::memcmp(ta->raw_data(), tb.raw_data(), ta->bytes()) != 0)
        return false;
      continue;
    }
    if (attr_to_string(ia->second) != attr_to_string(ib->second))
      return false;
  }
  return true;
}

std::vector<int> rgraph::topo_order() const {
  size_t n = nodes.size();
  std::vector<int> pending(n, 0), order;
  std::vector<std::vector<int>> out(n);
  for (size_t v = 0; v < n; ++v) {
    if (nodes[v].dead)
      continue;
    for (auto e : nodes[v].inputs) {
      if (is_back_edge(int(v), e))
        continue;
      out[size_t(e.node)].push_back(int(v));
      ++pending[v];
    }
    for (int c : nodes[v].control_inputs) {
      out[size_t(c)].push_back(int(v));
      ++pending[v];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (size_t v = 0; v < n; ++v)
    if (!nodes[v].dead && pending[v] == 0)
      ready.push(int(v));
  while (!ready.empty()) {
    int v = ready.top();
    ready.pop();
    order.push_back(v);
    for (int w : out[size_t(v)])
      if (--pending[size_t(w)] == 0)
        ready.push(w);
  }
  return order;
}

bool rgraph::is_stateful(int v) const {
  const op_def* def = source->ops().find(nodes[size_t(v)].op);
  return !def || def->stateful || is_control_flow_op(nodes[size_t(v)].op) ||
         nodes[size_t(v)].op == "Placeholder" || nodes[size_t(v)].op == "_Send" ||
         nodes[size_t(v)].op == "_Recv";
}

void rgraph::remove_unused() {
  auto data = consumers();
  auto control = control_consumers();
  std::vector<int> uses(nodes.size(), 0);
  for (size_t v = 0; v < nodes.size(); ++v)
    uses[v] = int(data[v].size() + control[v].size());
  auto order = topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    int v = *it;
    if (uses[size_t(v)] > 0 || is_kept(v) || is_stateful(v))
      continue;
    for (auto e : nodes[size_t(v)].inputs)
      --uses[size_t(e.node)];
    for (int c : nodes[size_t(v)].control_inputs)
      --uses[size_t(c)];
    kill(v);
  }
}

} // namespace runnel::optimize
