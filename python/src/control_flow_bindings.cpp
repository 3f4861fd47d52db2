// Control flow, TensorArrays and recurrent cells from Python. cond, case, switch_case and
// while_loop call back into Python to build their branches and bodies (at graph construction,
// with the GIL held); python/runnel/control_flow.py flattens TensorFlow's nested structures, so
// these functions see flat lists of tensors. The cells are the C++ ones (ops/layers/rnn.hpp),
// made by python/runnel/rnn.py once the input width is known.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>

#include "bindings.hpp"
#include "convert.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/layers/rnn.hpp"
#include "runnel/ops/layers/tensor_array.hpp"

namespace runnel::python {

namespace {

struct py_tensor_array {
  graph_ptr g;
  tensor_array ta;
};

/// A cell with what it needs alive: the cells a multi_rnn_cell points to, and its graph.
struct py_cell {
  graph_ptr g;
  std::shared_ptr<rnn_cell> cell;
  std::vector<std::shared_ptr<rnn_cell>> parts;
  std::vector<std::string> variables; ///< the VariableV2 nodes it made
};

std::vector<output> outputs_of(const graph_ptr& g, const std::vector<py_tensor>& ts,
                               const std::string& what) {
  std::vector<output> out;
  for (auto& t : ts) {
    if (t.g != g)
      throw py::value_error(what + ": tensor '" + t.o.name() +
                            "' belongs to another graph than the one being built");
    out.push_back(t.o);
  }
  return out;
}

std::vector<py_tensor> wrap(const graph_ptr& g, const std::vector<output>& os) {
  std::vector<py_tensor> out;
  for (auto& o : os)
    out.push_back({g, o});
  return out;
}

/// A branch that calls `fn` (no arguments, returning a list of tensors).
branch_fn python_branch(const graph_ptr& g, py::function fn, std::string what) {
  return [g, fn = std::move(fn), what = std::move(what)] {
    return outputs_of(g, fn().cast<std::vector<py_tensor>>(), what);
  };
}

graph_ptr graph_of(const std::vector<py_tensor>& ts, const char* what) {
  if (ts.empty())
    throw py::value_error(std::string(what) + " needs at least one tensor");
  return ts.front().g;
}

void bind_conditionals(py::module_& m) {
  m.def("_cond", [](const py_tensor& pred, py::function true_fn, py::function false_fn,
                    const std::string& name) {
    auto outs = cond(pred.o, python_branch(pred.g, std::move(true_fn), "cond '" + name + "'"),
                     python_branch(pred.g, std::move(false_fn), "cond '" + name + "'"), name);
    return wrap(pred.g, outs);
  });
  m.def("_case", [](const std::vector<py_tensor>& preds, const std::vector<py::function>& fns,
                    py::function default_fn, const std::string& name) {
    graph_ptr g = graph_of(preds, "case");
    if (fns.size() != preds.size())
      throw py::value_error("case: " + std::to_string(preds.size()) + " predicates and " +
                            std::to_string(fns.size()) + " functions");
    std::vector<std::pair<output, branch_fn>> branches;
    for (size_t i = 0; i < preds.size(); ++i)
      branches.emplace_back(outputs_of(g, {preds[i]}, "case").front(),
                            python_branch(g, fns[i], "case '" + name + "'"));
    return wrap(
        g, case_of(branches, python_branch(g, std::move(default_fn), "case '" + name + "'"), name));
  });
  m.def("_switch_case",
        [](const py_tensor& index, const std::vector<py::function>& fns, const std::string& name) {
          std::vector<branch_fn> branches;
          for (auto& f : fns)
            branches.push_back(python_branch(index.g, f, "switch_case '" + name + "'"));
          return wrap(index.g, switch_case(index.o, branches, name));
        });
}

void bind_while(py::module_& m) {
  m.def("_while_loop",
        [](py::function cond_fn, py::function body_fn, const std::vector<py_tensor>& loop_vars,
           int parallel_iterations, int64_t maximum_iterations,
           std::optional<py::list> shape_invariants, const std::string& name) {
          graph_ptr g = graph_of(loop_vars, "while_loop");
          while_options o;
          o.parallel_iterations = parallel_iterations;
          o.maximum_iterations = maximum_iterations;
          o.name = name;
          if (shape_invariants)
            for (auto s : *shape_invariants)
              o.shape_invariants.push_back(to_shape(s));
          std::string what = "while_loop '" + name + "'";
          auto outs = while_loop(
              [&](const std::vector<output>& v) {
                auto t = cond_fn(wrap(g, v)).cast<py_tensor>();
                return outputs_of(g, {t}, what + "'s condition").front();
              },
              [&](const std::vector<output>& v) {
                return outputs_of(g, body_fn(wrap(g, v)).cast<std::vector<py_tensor>>(),
                                  what + "'s body");
              },
              outputs_of(g, loop_vars, what), o);
          return wrap(g, outs);
        });
}

void bind_tensor_array(py::module_& m) {
  using ta = py_tensor_array;
  auto same = [](const ta& a, tensor_array t) { return ta{a.g, std::move(t)}; };
  py::class_<ta>(m, "_TensorArray")
      .def(py::init([](const py_tensor& size, const std::string& type, bool dynamic_size,
                       bool clear_after_read, py::handle element_shape, const std::string& name) {
        tensor_array_options o;
        o.dynamic_size = dynamic_size;
        o.clear_after_read = clear_after_read;
        o.element_shape = to_shape(element_shape);
        o.name = name;
        return ta{size.g, tensor_array(size.o.owner(), dtype_named(type), size.o, o)};
      }))
      .def_property_readonly("handle",
                             [](const ta& a) {
                               return py_tensor{a.g, a.ta.handle()};
                             })
      .def_property_readonly("flow",
                             [](const ta& a) {
                               return py_tensor{a.g, a.ta.flow()};
                             })
      .def_property_readonly("dtype", [](const ta& a) { return std::string(name(a.ta.type())); })
      .def_property_readonly("element_shape",
                             [](const ta& a) { return from_shape(a.ta.element_shape()); })
      .def("with_flow",
           [same](const ta& a, const py_tensor& flow) { return same(a, a.ta.with_flow(flow.o)); })
      .def("write", [same](const ta& a, const py_tensor& i,
                           const py_tensor& v) { return same(a, a.ta.write(i.o, v.o)); })
      .def("read",
           [](const ta& a, const py_tensor& i) {
             return py_tensor{a.g, a.ta.read(i.o)};
           })
      .def("gather",
           [](const ta& a, const py_tensor& i) {
             return py_tensor{a.g, a.ta.gather(i.o)};
           })
      .def("stack",
           [](const ta& a) {
             return py_tensor{a.g, a.ta.stack()};
           })
      .def("concat",
           [](const ta& a) {
             return py_tensor{a.g, a.ta.concat()};
           })
      .def("size",
           [](const ta& a) {
             return py_tensor{a.g, a.ta.size()};
           })
      .def("close",
           [](const ta& a) {
             return py_operation{a.g, a.ta.close()};
           })
      .def("scatter", [same](const ta& a, const py_tensor& i,
                             const py_tensor& v) { return same(a, a.ta.scatter(i.o, v.o)); })
      .def("unstack",
           [same](const ta& a, const py_tensor& v) { return same(a, a.ta.unstack(v.o)); })
      .def("split", [same](const ta& a, const py_tensor& v, const py_tensor& lengths) {
        return same(a, a.ta.split(v.o, lengths.o));
      });
}

/// A variable scope that reuses (TensorFlow's `reuse=True` or AUTO_REUSE): the cell's
/// variables are looked up under `prefix` ("dec/rnn/gru_cell/"); a missing one is an error when
/// `strict`, made anew otherwise. Empty prefix: no reuse.
struct cell_share {
  std::string prefix;
  bool strict = false;
  std::vector<std::string> found; ///< the shared VariableV2 nodes, in the order asked for
};

/// The variable whose VariableV2 node is `name`, with the read and initializer the builder
/// names after it.
std::optional<graph_variable> existing_variable(graph& g, const std::string& name) {
  auto id = g.find(name);
  if (!id || g.at(*id).op != "VariableV2")
    return std::nullopt;
  graph_variable v;
  v.ref = output(&g, {*id, 0});
  auto r = g.find(name + "/read");
  v.value = r ? output(&g, {*r, 0}) : v.ref;
  if (auto a = g.find(name + "/Assign"))
    v.initializer = operation(&g, *a);
  return v;
}

/// Makes a cell with `make` and records its variables: those it added to `g`, and those shared.
template <class F>
py_cell made_cell(const graph_ptr& g, const std::shared_ptr<cell_share>& share, F make) {
  auto before = g->collection("variables");
  py_cell c{g, make(), {}, {}};
  c.variables = share->found;
  for (int id : g->collection("variables"))
    if (std::find(before.begin(), before.end(), id) == before.end())
      c.variables.push_back(g->at(id).name);
  return c;
}

rnn_cell_options cell_options(const graph_ptr& g, const std::string& type, const std::string& name,
                              int64_t seed, bool fused, const std::shared_ptr<cell_share>& share) {
  rnn_cell_options o;
  o.type = dtype_named(type);
  o.name = name;
  o.seed = seed;
  o.fused = fused;
  if (!share->prefix.empty())
    o.existing = [g, share](const std::string& path) -> std::optional<graph_variable> {
      std::string full = share->prefix + path;
      auto v = existing_variable(*g, full);
      if (!v && share->strict)
        throw py::value_error("Variable " + full +
                              " does not exist, or was not created with tf.get_variable(). Did "
                              "you mean to set reuse=tf.AUTO_REUSE in VarScope?");
      if (v)
        share->found.push_back(full);
      return v;
    };
  return o;
}

std::shared_ptr<cell_share> share_of(const std::string& prefix, bool strict) {
  auto s = std::make_shared<cell_share>();
  s->prefix = prefix;
  s->strict = strict;
  return s;
}

void bind_cells(py::module_& m) {
  py::class_<py_cell>(m, "_RNNCell")
      .def_property_readonly("state_sizes", [](const py_cell& c) { return c.cell->state_sizes(); })
      .def_property_readonly("output_size", [](const py_cell& c) { return c.cell->output_size(); })
      .def_readonly("variables", &py_cell::variables)
      .def("step", [](py_cell& c, const py_tensor& x, const std::vector<py_tensor>& state) {
        auto [y, s] = c.cell->step(x.o, outputs_of(c.g, state, "the cell's state"));
        return std::make_pair(py_tensor{c.g, y}, wrap(c.g, s));
      });
  // `share_prefix`, `strict`: cell_share (empty prefix: the cell makes its own variables).
  m.def("_basic_rnn_cell", [](const graph_ptr& g, int64_t input_size, int64_t units,
                              const std::string& type, const std::string& name, int64_t seed,
                              const std::string& share_prefix, bool strict) {
    auto share = share_of(share_prefix, strict);
    return made_cell(g, share, [&] {
      return std::make_shared<basic_rnn_cell>(*g, input_size, units,
                                              cell_options(g, type, name, seed, false, share));
    });
  });
  m.def("_lstm_cell", [](const graph_ptr& g, int64_t input_size, int64_t units,
                         const std::string& type, const std::string& name, int64_t seed,
                         double forget_bias, bool fused, const std::string& share_prefix,
                         bool strict) {
    auto share = share_of(share_prefix, strict);
    return made_cell(g, share, [&] {
      return std::make_shared<lstm_cell>(
          *g, input_size, units, cell_options(g, type, name, seed, fused, share), forget_bias);
    });
  });
  m.def("_gru_cell",
        [](const graph_ptr& g, int64_t input_size, int64_t units, const std::string& type,
           const std::string& name, int64_t seed, const std::string& share_prefix, bool strict) {
          auto share = share_of(share_prefix, strict);
          return made_cell(g, share, [&] {
            return std::make_shared<gru_cell>(*g, input_size, units,
                                              cell_options(g, type, name, seed, false, share));
          });
        });
  m.def("_multi_rnn_cell", [](const std::vector<py_cell>& cells) {
    if (cells.empty())
      throw py::value_error("MultiRNNCell needs at least one cell");
    py_cell c{cells.front().g, nullptr, {}, {}};
    std::vector<rnn_cell*> raw;
    for (auto& part : cells) {
      raw.push_back(part.cell.get());
      c.parts.push_back(part.cell);
      c.parts.insert(c.parts.end(), part.parts.begin(), part.parts.end());
      c.variables.insert(c.variables.end(), part.variables.begin(), part.variables.end());
    }
    c.cell = std::make_shared<multi_rnn_cell>(raw);
    return c;
  });
}

/// The state as a flat list of tensors of `c`'s graph.
std::vector<output> state_of(const py_cell& c, const std::vector<py_tensor>& state) {
  return outputs_of(c.g, state, "the initial state");
}

void bind_rnns(py::module_& m) {
  m.def("_dynamic_rnn", [](py_cell& c, const py_tensor& inputs, const std::vector<py_tensor>& state,
                           std::optional<py_tensor> lengths, int parallel_iterations,
                           const std::string& name) {
    dynamic_rnn_options o;
    o.parallel_iterations = parallel_iterations;
    o.name = name;
    auto r = dynamic_rnn(*c.cell, inputs.o, state_of(c, state), lengths ? lengths->o : output(), o);
    return std::make_pair(py_tensor{c.g, r.outputs}, wrap(c.g, r.final_state));
  });
  m.def("_bidirectional_dynamic_rnn", [](py_cell& fw, py_cell& bw, const py_tensor& inputs,
                                         const std::vector<py_tensor>& fw_state,
                                         const std::vector<py_tensor>& bw_state,
                                         std::optional<py_tensor> lengths, int parallel_iterations,
                                         const std::string& name) {
    dynamic_rnn_options o;
    o.parallel_iterations = parallel_iterations;
    o.name = name;
    auto r = bidirectional_dynamic_rnn(*fw.cell, *bw.cell, inputs.o, state_of(fw, fw_state),
                                       state_of(bw, bw_state), lengths ? lengths->o : output(), o);
    return py::make_tuple(py_tensor{fw.g, r.forward_outputs}, py_tensor{fw.g, r.backward_outputs},
                          wrap(fw.g, r.forward_state), wrap(fw.g, r.backward_state));
  });
  m.def("_static_rnn", [](py_cell& c, const py_tensor& inputs, const std::vector<py_tensor>& state,
                          std::optional<py_tensor> lengths) {
    auto r = static_rnn(*c.cell, inputs.o, state_of(c, state), lengths ? lengths->o : output());
    return std::make_pair(py_tensor{c.g, r.outputs}, wrap(c.g, r.final_state));
  });
}

} // namespace

void bind_control_flow(py::module_& m) {
  bind_conditionals(m);
  bind_while(m);
  bind_tensor_array(m);
  bind_cells(m);
  bind_rnns(m);
}

} // namespace runnel::python
