// TensorFlow 1.x SavedModels from Python: load one and run its signatures, or export a session's
// graph as one (runnel/saved_model.py wraps these).
#include <map>
#include <memory>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "py_session.hpp"
#include "runnel/actors/state/saved_model.hpp"

namespace runnel::python {
namespace {

struct py_loaded_model {
  std::unique_ptr<saved_model> m;
};

} // namespace

void bind_saved_model(py::module_& m) {
  py::class_<py_loaded_model>(m, "_LoadedModel")
      .def_property_readonly("signatures",
                             [](const py_loaded_model& lm) {
                               py::dict out;
                               for (auto& [key, sig] : lm.m->signatures())
                                 out[py::str(key)] = signature_dict(sig);
                               return out;
                             })
      .def_property_readonly("tags",
                             [](const py_loaded_model& lm) { return lm.m->model().meta.tags; })
      .def_property_readonly("tag_sets",
                             [](const py_loaded_model& lm) { return lm.m->model().tag_sets; })
      .def("run", [](py_loaded_model& lm, const std::string& key, const py::dict& inputs,
                     const std::vector<std::string>& outputs) {
        std::map<std::string, tensor> feeds;
        for (auto& [k, v] : inputs)
          feeds.emplace(py::str(k), to_tensor(v));
        result<std::map<std::string, tensor>> r = status(error_code::internal, "not run");
        {
          py::gil_scoped_release unlocked;
          r = lm.m->run(key, feeds, outputs);
        }
        py::dict out;
        for (auto& [k, t] : check(std::move(r)))
          out[py::str(k)] = to_numpy(t);
        return out;
      });
  m.def("_load_saved_model", [](const std::string& dir, const std::vector<std::string>& tags) {
    result<std::unique_ptr<saved_model>> r = status(error_code::internal, "not loaded");
    {
      py::gil_scoped_release unlocked;
      r = saved_model::load(shared_runtime(), dir, tags);
    }
    return py_loaded_model{check(std::move(r))};
  });
  // signatures: key -> (method, {input key: tensor}, {output key: tensor})
  m.def("_save_saved_model",
        [](py_session& ps, const std::string& dir,
           const std::map<std::string, std::tuple<std::string, std::map<std::string, py_tensor>,
                                                  std::map<std::string, py_tensor>>>& signatures,
           const std::vector<std::string>& tags) {
          std::map<std::string, saved_model_signature> sigs;
          auto names = [&](const std::map<std::string, py_tensor>& tensors) {
            std::map<std::string, std::string> out;
            for (auto& [k, t] : tensors) {
              if (t.g != ps.g)
                raise(invalid_argument("simple_save: signature tensor '" + k +
                                       "' is not in the session's graph"));
              out[k] = t.o.node().name + ":" + std::to_string(t.o.index());
            }
            return out;
          };
          for (auto& [key, sig] : signatures)
            sigs[key] = {std::get<0>(sig), names(std::get<1>(sig)), names(std::get<2>(sig))};
          session& s = ps.get();
          status st;
          {
            py::gil_scoped_release unlocked;
            st = save_saved_model(s, *ps.g, dir, sigs, tags);
          }
          check(st);
        });
}

} // namespace runnel::python
