// The extension module behind `import runnel` (python/runnel/__init__.py wraps it).
#include "bindings.hpp"

PYBIND11_MODULE(_runnel, m) {
  m.doc() = "Runnel's C++ API for the runnel package (use `import runnel`, not this module)";
  runnel::python::bind_graph(m);
  runnel::python::bind_session(m);
  runnel::python::bind_train(m);
  runnel::python::bind_data(m);
}
