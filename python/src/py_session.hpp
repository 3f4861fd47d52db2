#pragma once
// A Session as Python holds it (session_bindings.cpp; the saver's bindings use it too).
#include <memory>

#include "convert.hpp"
#include "runnel/actors/exec/session.hpp"

namespace runnel::python {

/// A session and the graph it runs; closing waits for steps without holding the GIL (a step's
/// end may drop a fed array, which takes the GIL).
struct py_session {
  graph_ptr g;
  std::unique_ptr<session> s;
  void close() {
    if (s && !s->closed()) {
      py::gil_scoped_release unlocked;
      s->close();
    }
  }
  ~py_session() {
    if (s && Py_IsInitialized())
      close();
  }
  /// The session, with containers assigned to the nodes added since its last use.
  session& get() {
    if (!s || s->closed())
      raise(cancelled("the session is closed"));
    assign_containers(*g);
    return *s;
  }
};

} // namespace runnel::python
