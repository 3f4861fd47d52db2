// The extension module behind `import runnel` (python/runnel/__init__.py wraps it).
#include "bindings.hpp"
#include "convert.hpp"

PYBIND11_MODULE(_runnel, m) {
  m.doc() = "Runnel's C++ API for the runnel package (use `import runnel`, not this module)";
  // The builder API throws runnel::error: it becomes the runnel.errors exception of its code.
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const runnel::error& e) {
      try {
        runnel::python::raise(e.get_status());
      } catch (pybind11::error_already_set& set) {
        set.restore();
      }
    }
  });
  runnel::python::bind_graph(m);
  runnel::python::bind_session(m);
  runnel::python::bind_train(m);
  runnel::python::bind_data(m);
  runnel::python::bind_saved_model(m);
  runnel::python::bind_control_flow(m);
  runnel::python::bind_meta_graph(m);
}
