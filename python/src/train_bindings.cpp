// Training from Python: variables, gradients, the optimizers and the saver.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "convert.hpp"
#include "py_session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/train/optimizers.hpp"

namespace runnel::python {

namespace {

struct py_variable {
  graph_ptr g;
  graph_variable v;
};

struct py_optimizer {
  graph_ptr g; // set by the first use; one optimizer serves one graph
  std::shared_ptr<optimizer> opt;
};

struct py_saver {
  graph_ptr g;
  std::unique_ptr<saver> s;
};

learning_rate rate_of(py::handle lr) {
  if (py::isinstance<py_tensor>(lr))
    return learning_rate(lr.cast<py_tensor>().o);
  return learning_rate(lr.cast<double>());
}

std::vector<output> refs_of(const std::vector<py_variable>& vars) {
  std::vector<output> out;
  for (auto& v : vars)
    out.push_back(v.v.ref);
  return out;
}

/// A gradient for Python: None, a tensor, or (values, indices, dense_shape) for indexed slices.
py::object to_py(const graph_ptr& g, const gradient_value& v) {
  if (!v.valid())
    return py::none();
  if (!v.is_sparse())
    return py::cast(py_tensor{g, v.to_dense()});
  auto& s = v.slices();
  return py::make_tuple(py_tensor{g, s.values}, py_tensor{g, s.indices},
                        py_tensor{g, s.dense_shape});
}

gradient_value from_py(py::handle h) {
  if (py::isinstance<py::tuple>(h)) {
    auto t = h.cast<std::tuple<py_tensor, py_tensor, py_tensor>>();
    return indexed_slices{std::get<0>(t).o, std::get<1>(t).o, std::get<2>(t).o};
  }
  return gradient_value(h.cast<py_tensor>().o);
}

graph_ptr graph_of(py::handle h) {
  if (py::isinstance<py::tuple>(h))
    return std::get<0>(h.cast<std::tuple<py_tensor, py_tensor, py_tensor>>()).g;
  return h.cast<py_tensor>().g;
}

void bind_optimizers(py::module_& m) {
  py::class_<py_optimizer>(m, "_Optimizer")
      .def("minimize",
           [](py_optimizer& o, const py_tensor& loss, const std::vector<py_variable>& var_list,
              std::optional<py_variable> global_step, const std::string& name) {
             operation op = o.opt->minimize(loss.o, refs_of(var_list),
                                            global_step ? &global_step->v : nullptr, name);
             return py_operation{loss.g, op};
           })
      .def("compute_gradients",
           [](py_optimizer& o, const py_tensor& loss, const std::vector<py_variable>& var_list) {
             std::vector<std::pair<py::object, py_tensor>> out;
             for (auto& [grad, var] : o.opt->compute_gradients(loss.o, refs_of(var_list)))
               out.push_back({to_py(loss.g, grad), py_tensor{loss.g, var}});
             return out;
           })
      .def("apply_gradients",
           [](py_optimizer& o, const std::vector<std::pair<py::object, py_tensor>>& grads_and_vars,
              std::optional<py_variable> global_step, const std::string& name) {
             std::vector<std::pair<gradient_value, output>> gv;
             graph_ptr g;
             for (auto& [grad, var] : grads_and_vars) {
               gv.emplace_back(from_py(grad), var.o);
               g = var.g;
             }
             if (!g)
               throw py::value_error("apply_gradients: no (gradient, variable) pairs");
             operation op =
                 o.opt->apply_gradients(gv, global_step ? &global_step->v : nullptr, name);
             return py_operation{g, op};
           });
  m.def("_gradient_descent", [](py::handle lr) {
    return py_optimizer{nullptr, std::make_shared<gradient_descent_optimizer>(rate_of(lr))};
  });
  m.def("_momentum", [](py::handle lr, double momentum, bool nesterov) {
    return py_optimizer{nullptr,
                        std::make_shared<momentum_optimizer>(rate_of(lr), momentum, nesterov)};
  });
  m.def("_adagrad", [](py::handle lr, double initial) {
    return py_optimizer{nullptr, std::make_shared<adagrad_optimizer>(rate_of(lr), initial)};
  });
  m.def("_rmsprop", [](py::handle lr, double decay, double momentum, double epsilon) {
    return py_optimizer{nullptr,
                        std::make_shared<rmsprop_optimizer>(rate_of(lr), decay, momentum, epsilon)};
  });
  m.def("_adam", [](py::handle lr, double beta1, double beta2, double epsilon) {
    return py_optimizer{nullptr,
                        std::make_shared<adam_optimizer>(rate_of(lr), beta1, beta2, epsilon)};
  });
}

void bind_saver(py::module_& m) {
  py::class_<py_saver>(m, "_Saver")
      .def(py::init([](const graph_ptr& g, const std::vector<py_variable>& vars, int max_to_keep,
                       const std::string& format) {
        saver_options o;
        o.max_to_keep = max_to_keep;
        if (format == "tensorflow")
          o.format = checkpoint_format::tensorflow;
        else if (format != "hdf5")
          throw py::value_error("checkpoint format '" + format + "': 'hdf5' or 'tensorflow'");
        return py_saver{g, std::make_unique<saver>(*g, refs_of(vars), o)};
      }))
      .def(
          "save",
          [](py_saver& sv, py_session& ps, const std::string& prefix, std::optional<int64_t> step) {
            result<std::string> r = status(error_code::internal, "not run");
            {
              py::gil_scoped_release unlocked;
              r = sv.s->save(ps.get(), prefix, step);
            }
            return check(std::move(r));
          })
      .def("restore", [](py_saver& sv, py_session& ps, const std::string& path,
                         const std::map<std::string, std::string>& name_map) {
        // name_map: variable name -> its key in the checkpoint (an imported MetaGraph's saver)
        restore_options options;
        options.name_map = name_map;
        status st;
        {
          py::gil_scoped_release unlocked;
          st = sv.s->restore(ps.get(), path, options);
        }
        check(st);
      });
  m.def("_latest_checkpoint", [](const std::string& dir) -> py::object {
    auto r = saver::latest_checkpoint(dir);
    if (!r.ok())
      return py::none();
    return py::str(*r);
  });
}

} // namespace

void bind_train(py::module_& m) {
  py::class_<py_variable>(m, "_Variable")
      .def_property_readonly("ref",
                             [](const py_variable& v) {
                               return py_tensor{v.g, v.v.ref};
                             })
      .def_property_readonly("value",
                             [](const py_variable& v) {
                               return py_tensor{v.g, v.v.value};
                             })
      .def_property_readonly("initializer",
                             [](const py_variable& v) {
                               return py_operation{v.g, v.v.initializer};
                             })
      .def_property_readonly("name", [](const py_variable& v) { return v.v.name(); });
  m.def("_variable", [](const py_tensor& init, const std::string& name, bool trainable) {
    return py_variable{init.g, variable(init.o.owner(), init.o, name, trainable)};
  });
  m.def("_variables", [](const graph_ptr& g, const std::string& collection) {
    // The collection lists VariableV2 nodes; each one's read and initializer are found by the
    // names the builder gives them.
    std::vector<py_variable> out;
    for (int id : g->collection(collection)) {
      graph_variable v;
      v.ref = output(g.get(), {id, 0});
      auto& name = g->at(id).name;
      if (auto r = g->find(name + "/read"))
        v.value = output(g.get(), {*r, 0});
      else
        v.value = v.ref;
      if (auto a = g->find(name + "/Assign"))
        v.initializer = operation(g.get(), *a);
      out.push_back({g, v});
    }
    return out;
  });
  m.def("_global_variables_initializer", [](const graph_ptr& g) {
    return py_operation{g, global_variables_initializer(*g)};
  });
  m.def("_assign", [](const py_variable& v, const py_tensor& value, const std::string& kind,
                      const std::string& name) {
    output o = kind == "add"   ? assign_add(v.v, value.o, name)
               : kind == "sub" ? assign_sub(v.v, value.o, name)
                               : assign(v.v, value.o, name);
    return py_tensor{v.g, o};
  });
  m.def("_gradients", [](const std::vector<py_tensor>& ys, const std::vector<py_tensor>& xs,
                         const std::vector<py_tensor>& grad_ys, bool slices) {
    std::vector<output> y, x, gy;
    for (auto& t : ys)
      y.push_back(t.o);
    for (auto& t : xs)
      x.push_back(t.o);
    for (auto& t : grad_ys)
      gy.push_back(t.o);
    py::list out;
    auto grads = slices ? gradient_values(y, x, gy) : [&] {
      std::vector<gradient_value> dense;
      for (auto& d : gradients(y, x, gy))
        dense.push_back(d.valid() ? gradient_value(d) : gradient_value());
      return dense;
    }();
    for (size_t i = 0; i < grads.size(); ++i)
      out.append(to_py(xs[i].g, grads[i]));
    return out;
  });
  m.def("_clip_by_global_norm", [](const py::list& grads, double clip_norm) {
    std::vector<gradient_value> in;
    graph_ptr g;
    for (auto h : grads) {
      in.push_back(h.is_none() ? gradient_value() : from_py(h));
      if (!h.is_none())
        g = graph_of(h);
    }
    if (!g)
      throw py::value_error("clip_by_global_norm: no tensors (all None)");
    auto [clipped, norm] = clip_by_global_norm(in, clip_norm);
    py::list out;
    for (auto& c : clipped)
      out.append(to_py(g, c));
    return py::make_tuple(out, py_tensor{g, norm});
  });
  bind_optimizers(m);
  bind_saver(m);
}

} // namespace runnel::python
