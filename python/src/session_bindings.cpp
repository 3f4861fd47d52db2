// Sessions from Python: runs with NumPy feeds and fetches, the GIL released while a step runs,
// Ctrl-C interrupting a local step, traces, and the process's runtime.
#include <pybind11/stl.h>

#include <mutex>

#include "bindings.hpp"
#include "convert.hpp"
#include "py_session.hpp"
#include "runnel/actors/exec/runtime.hpp"
#include "runnel/actors/exec/session.hpp"

namespace runnel::python {

namespace {

std::mutex runtime_mu;
runtime* the_runtime = nullptr;
runtime_options pending_options;

session_options options_from(const py::dict& config) {
  session_options o;
  for (auto [k, v] : config) {
    std::string key = py::str(k);
    if (key == "allow_soft_placement")
      o.allow_soft_placement = v.cast<bool>();
    else if (key == "placement") {
      auto policy = v.cast<std::string>();
      if (policy != "cost_model" && policy != "first_feasible")
        throw py::value_error("placement '" + policy + "': 'first_feasible' or 'cost_model'");
      o.placement = policy == "cost_model" ? session_options::placement_policy::cost_model
                                           : session_options::placement_policy::first_feasible;
    } else if (key == "max_in_flight_steps")
      o.max_in_flight_steps = v.cast<int>();
    else if (key == "auth_token")
      o.auth_token = v.cast<std::string>();
    else if (key == "remote_timeout")
      o.remote_timeout = std::chrono::milliseconds(int64_t(v.cast<double>() * 1000));
    else if (key == "tls_cert")
      o.tls_cert = v.cast<std::string>();
    else if (key == "tls_key")
      o.tls_key = v.cast<std::string>();
    else if (key == "tls_ca")
      o.tls_ca = v.cast<std::string>();
    else
      throw py::value_error("unknown session option '" + key + "'");
  }
  return o;
}

std::unique_ptr<py_session> make_session(const graph_ptr& g, const std::string& target,
                                         const py::dict& config) {
  auto ps = std::make_unique<py_session>();
  ps->g = g;
  session_options o = options_from(config);
  runtime& rt = shared_runtime();
  if (target.empty())
    ps->s = std::make_unique<session>(rt, *g, o);
  else
    ps->s = std::make_unique<session>(rt, *g, target, o);
  return ps;
}

/// Runs a step with the GIL released; Ctrl-C (Python's handler only sets a flag, asked for
/// while the step runs) raises KeyboardInterrupt, a failed step its error. `fl` is emptied
/// while the GIL is free (fed arrays' references drop there).
std::vector<tensor> run_interruptible(session& s, feed_list& fl, const std::vector<output>& fo,
                                      const std::vector<operation>& to, run_options& ro,
                                      run_metadata* md) {
  bool interrupted = false;
  ro.interrupted = [&interrupted] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;
      return true;
    }
    return false;
  };
  result<std::vector<tensor>> r = status(error_code::internal, "not run");
  {
    py::gil_scoped_release unlocked;
    r = s.run(fl, fo, to, ro, md);
    fl.clear();
  }
  if (interrupted)
    throw py::error_already_set(); // the KeyboardInterrupt PyErr_CheckSignals raised
  if (!r.ok())
    raise(r.error());
  return std::move(r).value();
}

/// run() of the common case, without lists to convert: one fetched tensor and at most one feed
/// (`feed` None: none), no targets, untraced. Returns the fetched value.
py::object run_one(py_session& ps, const py_tensor& fetch, const py_tensor* feed,
                   py::handle value) {
  session& s = ps.get();
  if (fetch.g != ps.g)
    throw py::value_error("cannot fetch '" + fetch.o.name() + "': it belongs to another graph");
  feed_list fl;
  if (feed) {
    if (feed->g != ps.g)
      throw py::value_error("cannot feed '" + feed->o.name() + "': it belongs to another graph");
    fl.emplace_back(feed->o, to_tensor(value, feed->o.type()));
  }
  run_options ro;
  auto r = run_interruptible(s, fl, {fetch.o}, {}, ro, nullptr);
  return to_numpy(std::move(r[0]));
}

/// One step: `feeds` converted to the dtype of what they feed, the GIL released while it runs,
/// fetched tensors as NumPy arrays. With `trace`, returns (values, Chrome trace JSON).
py::object run(py_session& ps, const std::vector<py_tensor>& fetches,
               const std::vector<py_operation>& targets,
               const std::vector<std::pair<py_tensor, py::object>>& feeds, double timeout_s,
               bool trace) {
  session& s = ps.get();
  feed_list fl;
  for (auto& [t, value] : feeds) {
    if (t.g != ps.g)
      throw py::value_error("cannot feed '" + t.o.name() + "': it belongs to another graph");
    fl.emplace_back(t.o, to_tensor(value, t.o.type()));
  }
  std::vector<output> fo;
  for (auto& t : fetches) {
    if (t.g != ps.g)
      throw py::value_error("cannot fetch '" + t.o.name() + "': it belongs to another graph");
    fo.push_back(t.o);
  }
  std::vector<operation> to;
  for (auto& o : targets) {
    if (o.g != ps.g)
      throw py::value_error("cannot run '" + o.op.name() + "': it belongs to another graph");
    to.push_back(o.op);
  }
  run_options ro;
  ro.trace = trace;
  ro.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  run_metadata md;
  auto r = run_interruptible(s, fl, fo, to, ro, trace ? &md : nullptr);
  py::list values;
  for (auto& t : r)
    values.append(to_numpy(std::move(t)));
  if (!trace)
    return values;
  return py::make_tuple(values, md.to_chrome_trace());
}

/// framework.Tensor, the Python class run_fast recognises (set when session.py is imported).
PyObject* tensor_class = nullptr;

/// The C++ object a pybind11 instance of exactly T's class holds, without pybind11's cast, which
/// looks the type up by hashing its name on every call (a tenth of run_fast's own time).
/// Instances of subclasses, and any failure, go through the cast.
template <class T> T& bound(py::handle o) {
  static PyTypeObject* type =
      reinterpret_cast<PyTypeObject*>(py::detail::get_type_handle(typeid(T), true).ptr());
  if (Py_TYPE(o.ptr()) == type)
    if (void* p =
            reinterpret_cast<py::detail::instance*>(o.ptr())->get_value_and_holder().value_ptr())
      return *static_cast<T*>(p);
  return o.cast<T&>();
}

/// The C++ tensor a framework.Tensor wraps (its `_t`), when `o` is one of `ps`'s graph.
const py_tensor* wrapped_tensor(const py_session& ps, py::handle o) {
  if (!tensor_class || Py_TYPE(o.ptr()) != reinterpret_cast<PyTypeObject*>(tensor_class))
    return nullptr;
  static PyObject* name = PyUnicode_InternFromString("_t");
  py::object t = py::reinterpret_steal<py::object>(PyObject_GetAttr(o.ptr(), name));
  if (!t)
    throw py::error_already_set();
  // The slot holds the bound C++ object; it outlives this call through `o`.
  const auto& pt = bound<py_tensor>(t);
  return pt.g == ps.g ? &pt : nullptr;
}

/// Session.run's common case in one call from Python: one framework.Tensor fetched of the
/// session's graph, with no feed or one of such a tensor. Anything else answers NotImplemented
/// for the general path (a Python method checking the same made a run 15% slower).
py::object run_fast(py::handle self, py::handle fetches, py::handle feed_dict) {
  py_session& ps = bound<py_session>(self);
  const py_tensor* fetch = wrapped_tensor(ps, fetches);
  if (!fetch)
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  if (feed_dict.is_none())
    return run_one(ps, *fetch, nullptr, py::none());
  if (!PyDict_CheckExact(feed_dict.ptr()) || PyDict_Size(feed_dict.ptr()) > 1)
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  if (!PyDict_Next(feed_dict.ptr(), &pos, &key, &value))
    return run_one(ps, *fetch, nullptr, py::none());
  const py_tensor* feed = wrapped_tensor(ps, key);
  if (!feed)
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  py::object keep = py::reinterpret_borrow<py::object>(value); // the dict may change meanwhile
  return run_one(ps, *fetch, feed, keep);
}

/// A C++ exception from run_fast as the Python error pybind11's dispatcher would set.
PyObject* error_from_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    if (!py::detail::apply_exception_translators(
            py::detail::get_local_internals().registered_exception_translators) &&
        !py::detail::apply_exception_translators(
            py::detail::get_internals().registered_exception_translators))
      PyErr_SetString(PyExc_SystemError, "an unknown C++ exception in Session.run");
  }
  return nullptr;
}

/// Session.run itself, a method descriptor of the Python class (no Python frame and no pybind11
/// dispatch before the step, a fifth of what Python added to a trivial run): `run(fetches)` and
/// `run(fetches, feed_dict)` go to run_fast; anything else, and whatever run_fast declines, to
/// the class's `_run`, the general path written in Python.
PyObject* session_run(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  static PyObject* s_name = PyUnicode_InternFromString("_s");
  static PyObject* general = PyUnicode_InternFromString("_run");
  static PyObject* feed_dict_name = PyUnicode_InternFromString("feed_dict");
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs == 0 && nkw == 0) {
    PyErr_SetString(PyExc_TypeError, "Session.run() missing its argument 'fetches'");
    return nullptr;
  }
  PyObject* feed_dict = nullptr;
  if (nkw == 0 && (nargs == 1 || nargs == 2))
    feed_dict = nargs == 2 ? args[1] : Py_None;
  else if (nkw == 1 && nargs == 1 &&
           PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), feed_dict_name) == 0)
    feed_dict = args[1];
  if (feed_dict) {
    PyObject* s = PyObject_GetAttr(self, s_name);
    if (!s)
      return nullptr;
    PyObject* out = nullptr;
    try {
      out = run_fast(s, args[0], feed_dict).release().ptr();
    } catch (...) {
      out = error_from_current_exception();
    }
    Py_DECREF(s);
    if (out != Py_NotImplemented)
      return out;
    Py_DECREF(out);
  }
  std::vector<PyObject*> with_self(size_t(1 + nargs + nkw));
  with_self[0] = self;
  std::copy(args, args + nargs + nkw, with_self.begin() + 1);
  return PyObject_VectorcallMethod(general, with_self.data(), size_t(1 + nargs), kwnames);
}

PyMethodDef session_run_def = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&session_run)),
    METH_FASTCALL | METH_KEYWORDS,
    "run($self, fetches, feed_dict=None, options=None, run_metadata=None)\n--\n\n"
    "Runs one step: the values of `fetches` (a tensor, an operation, or nested lists, tuples,\n"
    "dicts and namedtuples of them, by name or object) as NumPy arrays in the same structure,\n"
    "with `feed_dict` mapping tensors (or their names) to values. `options` (RunOptions:\n"
    "trace_level, timeout_in_ms) and `run_metadata` (receives the Chrome trace) as in\n"
    "TensorFlow 1.x."};

} // namespace

runtime& shared_runtime() {
  std::lock_guard lock(runtime_mu);
  if (!the_runtime)
    the_runtime = new runtime(pending_options); // never destroyed: see bindings.hpp
  return *the_runtime;
}

void bind_session(py::module_& m) {
  py::class_<py_session>(m, "_Session")
      .def(py::init(&make_session))
      .def("run", &run)
      // The same step run `n` times from C++ (the GIL released): what bench/python_bench.py
      // compares a Python run with, in the same process and runtime.
      .def("cpp_runs",
           [](py_session& ps, const py_tensor& fetch, const py_tensor& feed, py::handle value,
              int n) {
             session& s = ps.get();
             feed_list fl{{feed.o, to_tensor(value, feed.o.type()).copy()}};
             py::gil_scoped_release unlocked;
             auto t0 = std::chrono::steady_clock::now();
             for (int i = 0; i < n; ++i)
               if (auto r = s.run(fl, {fetch.o}); !r.ok()) {
                 py::gil_scoped_acquire gil;
                 raise(r.error());
               }
             return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                    n;
           })
      .def("close", &py_session::close)
      .def_property_readonly("closed", [](const py_session& ps) { return !ps.s || ps.s->closed(); })
      .def_property_readonly("num_instances", [](const py_session& ps) {
        return ps.s ? ps.s->num_instances() : size_t(0);
      });
  m.def("_set_runtime_options", [](int cpu_devices, int intra_op_threads, int scheduler_threads) {
    std::lock_guard lock(runtime_mu);
    if (the_runtime)
      raise(failed_precondition("the runtime is already running: set its options before the "
                                "first Session"));
    pending_options.cpu_devices = cpu_devices;
    pending_options.intra_op_threads = intra_op_threads;
    pending_options.scheduler_threads = scheduler_threads;
  });
  m.def("_devices", [] { return shared_runtime().devices(); });
  // Makes the C++ session_run the `run` of the Python class `cls` (session.Session).
  m.def("_install_run", [](py::object cls) {
    if (!PyType_Check(cls.ptr()))
      throw py::type_error("_install_run takes a class");
    py::object descr = py::reinterpret_steal<py::object>(
        PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &session_run_def));
    if (!descr)
      throw py::error_already_set();
    cls.attr("run") = descr;
  });
  m.def("_set_tensor_class", [](py::object cls) {
    Py_XDECREF(tensor_class);
    tensor_class = cls.release().ptr(); // kept for the interpreter's life
  });
}

} // namespace runnel::python
