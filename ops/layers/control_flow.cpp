// cond, case_of, switch_case and while_loop over Switch/Merge/Enter/Exit/NextIteration, laid out
// as TensorFlow's v1 tf.cond and tf.while_loop lay them out, so that graphs from either look
// alike to the executor.
#include "runnel/ops/layers/control_flow.hpp"

#include <map>

#include "runnel/ops/layers/control_flow_internal.hpp"

namespace runnel {
namespace {

std::string leaf(const std::string& scoped) {
  auto slash = scoped.rfind('/');
  return slash == std::string::npos ? scoped : scoped.substr(slash + 1);
}

void check_predicate(const output& pred, const std::string& what) {
  if (pred.type() != dtype::boolean || (pred.shape().has_known_rank() && pred.shape().rank() != 0))
    throw error(invalid_argument(what + ": the predicate '" + pred.name() +
                                 "' must be a bool scalar, got " + std::string(name(pred.type())) +
                                 pred.shape().to_string()));
}

/// True when `s` is at least as specific as `invariant` (equal where the invariant is known).
bool fits(const shape& s, const shape& invariant) {
  if (!invariant.has_known_rank())
    return true;
  if (!s.has_known_rank() || s.rank() != invariant.rank())
    return false;
  for (int d = 0; d < s.rank(); ++d)
    if (invariant[d] >= 0 && s[d] != invariant[d])
      return false;
  return true;
}

} // namespace


result<endpoint> cond_context::import(graph& g, endpoint e) {
  if (auto it = imported_.find(e); it != imported_.end())
    return it->second;
  RUNNEL_ASSIGN_OR_RETURN(int sw, g.add_op("Switch", "switch", {e, pred_.ep()}));
  g.mutable_node(sw).context = id;
  endpoint inside{sw, branch_};
  imported_.emplace(e, inside);
  return inside;
}

result<endpoint> while_context::import(graph& g, endpoint e) {
  if (auto it = imported_.find(e); it != imported_.end())
    return it->second;
  RUNNEL_ASSIGN_OR_RETURN(int enter, g.add_op("Enter", "invariant", {e}, enter_attrs(true)));
  g.mutable_node(enter).context = id;
  endpoint inside{enter, 0};
  imported_.emplace(e, inside);
  return inside;
}

void begin_loop_variable(graph& g, while_context& ctx, output initial, const shape& invariant) {
  while_context::variable v;
  {
    auto outside = g.enter_context(ctx.outer);
    v.enter = g.add_op("Enter", "enter", {initial.ep()}, ctx.enter_attrs(false)).value();
  }
  g.mutable_node(v.enter).context = ctx.id;
  g.mutable_node(v.enter).output_shapes[0] = invariant;
  auto inside = g.enter_context(&ctx);
  endpoint e{v.enter, 0};
  v.merge = g.build("Merge", "merge", {e, e}, {{"N", int64_t(2)}})[0].node_id();
  ctx.vars.push_back(v);
}

void switch_loop_variables(graph& g, while_context& ctx, size_t first) {
  auto inside = g.enter_context(&ctx);
  for (size_t k = first; k < ctx.vars.size(); ++k) {
    auto& v = ctx.vars[k];
    auto sw = g.build("Switch", "switch", {{v.merge, 0}, {ctx.loop_cond, 0}});
    v.switch_op = sw[0].node_id();
    v.exit = g.build("Exit", "exit", {sw[0].ep()})[0].node_id();
    g.mutable_node(v.exit).context = ctx.outer ? ctx.outer->id : -1;
    v.body = identity(sw[1]).node_id();
  }
}

void close_loop_variable(graph& g, while_context& ctx, size_t k, output value) {
  auto inside = g.enter_context(&ctx);
  auto& v = ctx.vars[k];
  v.next = g.build("NextIteration", "next_iteration", {value.ep()})[0].node_id();
  throw_if_error(g.set_back_edge(v.merge, 1, {v.next, 0}));
}

while_context::variable add_loop_variable(graph& g, while_context& ctx, output initial,
                                          const std::function<output(output)>& next,
                                          const shape& invariant) {
  begin_loop_variable(g, ctx, initial, invariant);
  size_t k = ctx.vars.size() - 1;
  switch_loop_variables(g, ctx, k);
  output value;
  {
    auto inside = g.enter_context(&ctx);
    value = next(output(&g, {ctx.vars[k].body, 0}));
  }
  close_loop_variable(g, ctx, k, value);
  return ctx.vars[k];
}

std::vector<output> cond(output pred, const branch_fn& true_fn, const branch_fn& false_fn,
                         std::string_view name) {
  graph& g = pred.owner();
  std::string scoped = g.reserve_name(name);
  check_predicate(pred, "cond '" + scoped + "'");
  auto scope = g.name_scope(leaf(scoped));
  auto sw = g.build("Switch", "switch_pred", {pred.ep(), pred.ep()});
  auto pred_id = identity(pred, "pred_id");
  std::vector<output> results[2];
  for (int b : {1, 0}) {
    auto& ctx = g.add_flow_context(std::make_unique<cond_context>(pred_id, b, scoped));
    ctx.outer = g.current_context();
    auto pivot = identity(sw[size_t(b)], b ? "switch_t" : "switch_f");
    g.mutable_node(pivot.node_id()).context = ctx.id;
    ctx.pivot = pivot.node_id();
    auto inside = g.enter_context(&ctx);
    results[b] = (b ? true_fn : false_fn)();
    // Through an Identity in the branch, so that an output taken from outside is switched too
    // (dead when the branch is not taken).
    for (auto& r : results[b])
      r = identity(r);
  }
  if (results[0].size() != results[1].size())
    throw error(invalid_argument("cond '" + scoped + "': the true branch gives " +
                                 std::to_string(results[1].size()) +
                                 " outputs but the false branch " +
                                 std::to_string(results[0].size())));
  std::vector<output> out;
  for (size_t k = 0; k < results[0].size(); ++k) {
    if (results[0][k].type() != results[1][k].type())
      throw error(invalid_argument(
          "cond '" + scoped + "': output " + std::to_string(k) + " is " +
          std::string(runnel::name(results[1][k].type())) + " in the true branch but " +
          std::string(runnel::name(results[0][k].type())) + " in the false branch"));
    auto wiring = g.plumbing();
    out.push_back(g.build("Merge", "merge", {results[0][k].ep(), results[1][k].ep()},
                          {{"N", int64_t(2)}})[0]);
  }
  return out;
}

output cond(output pred, const std::function<output()>& true_fn,
            const std::function<output()>& false_fn, std::string_view name) {
  auto out = cond(
      pred, [&] { return std::vector<output>{true_fn()}; },
      [&] { return std::vector<output>{false_fn()}; }, name);
  return out.at(0);
}

std::vector<output> case_of(const std::vector<std::pair<output, branch_fn>>& branches,
                            const branch_fn& default_fn, std::string_view name) {
  std::function<std::vector<output>(size_t)> from = [&](size_t i) -> std::vector<output> {
    if (i == branches.size())
      return default_fn();
    return cond(
        branches[i].first, branches[i].second, [&] { return from(i + 1); }, name);
  };
  return from(0);
}

std::vector<output> switch_case(output index, const std::vector<branch_fn>& branches,
                                std::string_view name) {
  if (branches.empty())
    throw error(invalid_argument("switch_case: no branches"));
  if (index.type() != dtype::i32)
    throw error(invalid_argument("switch_case: the index '" + index.name() +
                                 "' must be int32, got " + std::string(runnel::name(index.type()))));
  graph& g = index.owner();
  std::vector<std::pair<output, branch_fn>> cases;
  for (size_t k = 0; k + 1 < branches.size(); ++k)
    cases.emplace_back(equal(index, constant(g, int32_t(k))), branches[k]);
  return case_of(cases, branches.back(), name);
}

std::vector<output> while_loop(const loop_cond_fn& cond_fn, const loop_body_fn& body_fn,
                               std::vector<output> loop_vars, const while_options& options) {
  if (loop_vars.empty())
    throw error(invalid_argument("while_loop '" + options.name + "': no loop variables"));
  graph& g = loop_vars[0].owner();
  std::string scoped = g.reserve_name(options.name);
  auto what = "while_loop '" + scoped + "'";
  if (options.parallel_iterations < 1)
    throw error(invalid_argument(what + ": parallel_iterations must be at least 1"));
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size())
    throw error(invalid_argument(what + ": " + std::to_string(options.shape_invariants.size()) +
                                 " shape invariants for " + std::to_string(loop_vars.size()) +
                                 " loop variables"));
  auto scope = g.name_scope(leaf(scoped));
  std::vector<shape> invariants = options.shape_invariants;
  if (invariants.empty())
    for (auto& v : loop_vars)
      invariants.push_back(v.shape());
  for (size_t k = 0; k < loop_vars.size(); ++k)
    if (!fits(loop_vars[k].shape(), invariants[k]))
      throw error(invalid_argument(what + ": loop variable " + std::to_string(k) + " ('" +
                                   loop_vars[k].name() + "') has shape " +
                                   loop_vars[k].shape().to_string() +
                                   ", which its shape invariant " + invariants[k].to_string() +
                                   " does not allow"));
  bool counted = options.maximum_iterations >= 0;
  if (counted) { // an iteration counter as a hidden first loop variable, as TensorFlow does
    loop_vars.insert(loop_vars.begin(), constant(g, int32_t(0), "iteration_counter"));
    invariants.insert(invariants.begin(), shape{});
  }
  auto& ctx = static_cast<while_context&>(g.add_flow_context(std::make_unique<while_context>(
      scoped, scoped + "/while_context", options.parallel_iterations)));
  ctx.outer = g.current_context();

  std::vector<output> merges, body_in, exits;
  for (size_t k = 0; k < loop_vars.size(); ++k) {
    begin_loop_variable(g, ctx, loop_vars[k], invariants[k]);
    merges.emplace_back(&g, endpoint{ctx.vars[k].merge, 0});
  }
  auto inside = g.enter_context(&ctx);
  ctx.pivot = merges[0].node_id();
  std::vector<output> user(merges.begin() + (counted ? 1 : 0), merges.end());
  output c = cond_fn(user);
  check_predicate(c, what + ": the condition");
  if (counted)
    c = logical_and(less(merges[0], constant(g, int32_t(options.maximum_iterations))), c);
  ctx.loop_cond = g.build("LoopCond", "loop_cond", {c.ep()})[0].node_id();
  switch_loop_variables(g, ctx, 0);
  for (auto& v : ctx.vars) {
    exits.emplace_back(&g, endpoint{v.exit, 0});
    body_in.emplace_back(&g, endpoint{v.body, 0});
  }
  ctx.pivot = body_in[0].node_id();
  user.assign(body_in.begin() + (counted ? 1 : 0), body_in.end());
  auto results = body_fn(user);
  if (counted)
    results.insert(results.begin(), body_in[0] + constant(g, int32_t(1)));
  if (results.size() != loop_vars.size())
    throw error(invalid_argument(what + ": the body returns " +
                                 std::to_string(results.size() - (counted ? 1 : 0)) +
                                 " tensors for " +
                                 std::to_string(loop_vars.size() - (counted ? 1 : 0)) +
                                 " loop variables"));
  for (size_t k = counted ? 1 : 0; k < results.size(); ++k) {
    size_t user_k = k - (counted ? 1 : 0);
    auto& r = results[k];
    if (r.type() != loop_vars[k].type())
      throw error(invalid_argument(what + ": loop variable " + std::to_string(user_k) + " ('" +
                                   loop_vars[k].name() + "') is " +
                                   std::string(runnel::name(loop_vars[k].type())) +
                                   " but the body returns " + std::string(runnel::name(r.type())) +
                                   " ('" + r.name() + "')"));
    if (!fits(r.shape(), invariants[k]))
      throw error(invalid_argument(
          what + ": loop variable " + std::to_string(user_k) + " ('" + loop_vars[k].name() +
          "') has shape " + invariants[k].to_string() + " entering the loop but " +
          r.shape().to_string() + " after an iteration ('" + r.name() +
          "'); give shape_invariants a shape that allows both (unknown dimensions as -1)"));
  }
  for (size_t k = 0; k < results.size(); ++k)
    close_loop_variable(g, ctx, k, results[k]);
  return std::vector<output>(exits.begin() + (counted ? 1 : 0), exits.end());
}

} // namespace runnel
