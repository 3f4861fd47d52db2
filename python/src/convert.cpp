// Python <-> Runnel conversions (convert.hpp).
#include "convert.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace runnel::python {

namespace {

/// Drops a Python reference kept by a borrowed tensor; runtime threads take the GIL for it.
void release_object(void* context) {
  auto* obj = static_cast<py::object*>(context);
  if (!Py_IsInitialized() || _Py_IsFinalizing()) { // the interpreter is (nearly) gone: leak
    obj->release();
    delete obj;
    return;
  }
  py::gil_scoped_acquire gil;
  delete obj;
}

/// NumPy's module, imported once (leaked: it lives as long as the interpreter).
const py::object& numpy() {
  static auto* np = new py::object(py::module_::import("numpy"));
  return *np;
}

tensor strings_to_tensor(py::handle value) {
  py::array arr = numpy().attr("asarray")(value, py::arg("dtype") = "object");
  shape s(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim()));
  tensor t(dtype::string, s);
  auto* out = t.data<std::string>();
  int64_t i = 0;
  for (py::handle item : arr.attr("ravel")()) {
    if (py::isinstance<py::bytes>(item))
      out[i++] = item.cast<std::string>();
    else if (py::isinstance<py::str>(item))
      out[i++] = item.cast<std::string>(); // UTF-8
    else
      throw py::type_error("a string tensor takes bytes or str, got " +
                           std::string(py::str(item.get_type().attr("__name__"))));
  }
  return t;
}

} // namespace

namespace {

struct graph_record {
  std::string container;
  int swept = 0; // nodes already given the container
};
std::mutex graphs_mu;
std::unordered_map<const graph*, graph_record> graphs;
int64_t graphs_made = 0;

} // namespace

graph_ptr adopt_graph(graph g) {
  auto* raw = new graph(std::move(g));
  {
    std::lock_guard lock(graphs_mu);
    graphs[raw].container = "python_graph_" + std::to_string(++graphs_made);
  }
  return graph_ptr(raw, [](graph* p) {
    {
      std::lock_guard lock(graphs_mu);
      graphs.erase(p);
    }
    delete p;
  });
}

void assign_containers(graph& g) {
  std::lock_guard lock(graphs_mu);
  auto changing = g.lock_for_changes(); // another thread's step may be reading the graph
  auto it = graphs.find(&g);
  if (it == graphs.end())
    return;
  for (int id = it->second.swept; id < g.num_nodes(); ++id) {
    node& n = g.mutable_node(id);
    if (!n.def || !n.def->find_attr_def("container"))
      continue;
    auto a = n.attrs.find("container");
    if (a == n.attrs.end() || std::get<std::string>(a->second).empty())
      n.attrs["container"] = it->second.container;
  }
  it->second.swept = g.num_nodes();
}

dtype dtype_named(const std::string& name) {
  auto t = parse_dtype(name);
  if (!t.ok())
    throw py::type_error("not a Runnel dtype: '" + name + "'");
  return *t;
}

namespace {

py::dtype make_numpy_dtype(dtype t) {
  switch (t) {
    case dtype::f16:
      return py::dtype("float16");
    case dtype::bf16:
    case dtype::f32:
      return py::dtype("float32");
    case dtype::f64:
      return py::dtype("float64");
    case dtype::i8:
      return py::dtype("int8");
    case dtype::u8:
      return py::dtype("uint8");
    case dtype::i32:
      return py::dtype("int32");
    case dtype::i64:
      return py::dtype("int64");
    case dtype::boolean:
      return py::dtype("bool");
    case dtype::string:
      return py::dtype("object");
    case dtype::invalid:
      break;
  }
  throw py::type_error("a tensor of no dtype has no NumPy form");
}

} // namespace

py::dtype numpy_dtype(dtype t) {
  // Made once per dtype (leaked with the interpreter): feeds ask for them on every run.
  static std::vector<py::dtype*> made(size_t(dtype::string) + 1, nullptr);
  auto& d = made.at(size_t(t));
  if (!d)
    d = new py::dtype(make_numpy_dtype(t));
  return *d;
}

namespace {

/// Entry `index` of NumPy's C API table (numpy/__multiarray_api.h names them), found as pybind11
/// finds that table.
void* numpy_api(int index) {
  static void** table = [] {
    py::object core;
    try {
      core = py::module_::import("numpy._core.multiarray"); // NumPy 2
    } catch (py::error_already_set&) {
      core = py::module_::import("numpy.core.multiarray");
    }
    py::object api = core.attr("_ARRAY_API");
    return static_cast<void**>(PyCapsule_GetPointer(api.ptr(), nullptr));
  }();
  return table[index];
}

/// The NumPy scalar type of `t` (numpy.float32, ...), looked up once (leaked with the
/// interpreter).
PyTypeObject* numpy_scalar_type(dtype t) {
  static std::vector<PyObject*> types(size_t(dtype::string) + 1, nullptr);
  auto& type = types.at(size_t(t));
  if (!type)
    type = py::object(numpy_dtype(t).attr("type")).release().ptr();
  return reinterpret_cast<PyTypeObject*>(type);
}

/// A numeric scalar fed as a Python number or a NumPy scalar (a learning rate, a flag): made
/// directly, without the array NumPy would build; an invalid tensor when `value` is not one.
tensor scalar_tensor(py::handle value, dtype want) {
  PyObject* o = value.ptr();
  if (want != dtype::bf16 && want != dtype::f16 && Py_TYPE(o) == numpy_scalar_type(want)) {
    // NumPy's PyArray_ScalarAsCtype (entry 62): the value's bytes, where the buffer protocol
    // would have built a 0-d array to view.
    using as_ctype_fn = void (*)(PyObject*, void*);
    static const auto as_ctype = reinterpret_cast<as_ctype_fn>(numpy_api(62));
    tensor out(want, shape{});
    as_ctype(o, out.raw_data());
    return out;
  }
  if (PyFloat_CheckExact(o)) {
    if (want == dtype::f32)
      return tensor::scalar(float(PyFloat_AS_DOUBLE(o)));
    if (want == dtype::f64)
      return tensor::scalar(PyFloat_AS_DOUBLE(o));
    return {};
  }
  if (PyBool_Check(o))
    return want == dtype::boolean ? tensor::scalar(o == Py_True) : tensor();
  if (!PyObject_CheckBuffer(o) || PyLong_Check(o))
    return {};
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return {};
  }
  tensor out;
  const char* f = view.format ? view.format : "B";
  char code = f[0] == '=' || f[0] == '<' || f[0] == '@' ? f[1] : f[0];
  dtype got = code == 'f' && view.itemsize == 4                    ? dtype::f32
              : code == 'd' && view.itemsize == 8                  ? dtype::f64
              : (code == 'i' || code == 'l') && view.itemsize == 4 ? dtype::i32
              : (code == 'l' || code == 'q') && view.itemsize == 8 ? dtype::i64
              : code == '?' && view.itemsize == 1                  ? dtype::boolean
                                                                   : dtype::invalid;
  if (view.ndim == 0 && got == want && view.len == view.itemsize) {
    out = tensor(want, shape{});
    std::memcpy(out.raw_data(), view.buf, size_t(view.itemsize));
  }
  PyBuffer_Release(&view);
  return out;
}

} // namespace

tensor to_tensor(py::handle value, dtype want) {
  if (want == dtype::string)
    return strings_to_tensor(value);
  if (want != dtype::invalid && want != dtype::bf16 && !py::isinstance<py::array>(value))
    if (tensor t = scalar_tensor(value, want); t.valid())
      return t;
  if (want != dtype::invalid && want != dtype::bf16 && py::isinstance<py::array>(value)) {
    // The common feed: already an array of the right dtype and layout, borrowed as it is.
    auto arr = py::reinterpret_borrow<py::array>(value);
    if ((arr.flags() & py::array::c_style) && arr.dtype().equal(numpy_dtype(want)))
      return tensor::borrow(want,
                            shape(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim())),
                            const_cast<void*>(arr.data()), release_object, new py::object(arr));
  }
  py::array arr = numpy().attr("asarray")(value);
  char kind = arr.dtype().kind();
  if (want == dtype::invalid && (kind == 'O' || kind == 'S' || kind == 'U'))
    return strings_to_tensor(arr);
  if (want == dtype::invalid) {
    std::string name = py::str(arr.dtype());
    want = dtype_named(name == "bool" ? "bool" : name);
  }
  py::dtype np = numpy_dtype(want);
  // asarray, not ascontiguousarray, which makes a scalar an array of one.
  arr = numpy().attr("asarray")(arr, py::arg("dtype") = np, py::arg("order") = "C");
  shape s(std::vector<int64_t>(arr.shape(), arr.shape() + arr.ndim()));
  if (want == dtype::bf16) { // no NumPy bfloat16: round from float32
    tensor t(dtype::bf16, s);
    const float* src = static_cast<const float*>(arr.data());
    auto* dst = t.data<bfloat16>();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      dst[i] = bfloat16(src[i]);
    return t;
  }
  auto* keep = new py::object(arr);
  return tensor::borrow(want, std::move(s), const_cast<void*>(arr.data()), release_object, keep);
}

namespace {

/// NumPy's PyArray_Scalar (entry 60 of its C API table): a scalar of `descr` made from the bytes
/// at `data`.
py::object array_scalar(const void* data, const py::dtype& descr) {
  using make_fn = PyObject* (*)(void*, PyObject*, PyObject*);
  static const auto make = reinterpret_cast<make_fn>(numpy_api(60));
  PyObject* out = make(const_cast<void*>(data), descr.ptr(), nullptr);
  if (!out)
    throw py::error_already_set();
  return py::reinterpret_steal<py::object>(out);
}

/// A scalar as TensorFlow's Session.run gives it: a NumPy scalar (numpy.float32, ...), bytes
/// for a string. Made by NumPy's C API from the tensor's bytes: calling numpy.float32(value)
/// instead was a tenth of a trivial run from Python (perf, 2026-12-03).
py::object numpy_scalar(const tensor& t) {
  switch (t.type()) {
    case dtype::bf16: { // no NumPy bfloat16: as float32, like arrays of it
      float v = float(*t.data<bfloat16>());
      return array_scalar(&v, numpy_dtype(dtype::f32));
    }
    case dtype::string:
      return py::bytes(*t.data<std::string>());
    case dtype::invalid:
      throw py::type_error("a tensor of no dtype has no NumPy form");
    default:
      return array_scalar(t.raw_data(), numpy_dtype(t.type()));
  }
}

} // namespace

py::object to_numpy(tensor t) {
  if (!t.valid())
    return py::none();
  if (!t.host_readable())
    throw py::value_error("a tensor in " + t.memory_name() + " cannot be read from Python");
  if (t.shape().rank() == 0)
    return numpy_scalar(t);
  std::vector<py::ssize_t> dims(t.shape().dims().begin(), t.shape().dims().end());
  if (t.type() == dtype::string) {
    py::array out(py::dtype("object"), dims);
    auto* items = static_cast<PyObject**>(out.mutable_data());
    const auto* src = t.data<std::string>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      py::bytes b(src[i]);
      Py_XDECREF(items[i]);
      items[i] = b.release().ptr();
    }
    return out;
  }
  if (t.type() == dtype::bf16) {
    py::array_t<float> out(dims);
    const auto* src = t.data<bfloat16>();
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      dst[i] = float(src[i]);
    return out;
  }
  if (t.num_elements() == 0)
    return py::array(numpy_dtype(t.type()), dims);
  auto* keep = new tensor(std::move(t));
  py::capsule owner(keep, [](void* p) { delete static_cast<tensor*>(p); });
  py::array out(numpy_dtype(keep->type()), dims, keep->raw_data(), owner);
  if (!keep->is_unique()) // a variable's value, a constant, a fed array: not ours to write
    py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

shape to_shape(py::handle value) {
  if (value.is_none())
    return shape::unknown();
  std::vector<int64_t> dims;
  for (py::handle d : value)
    dims.push_back(d.is_none() ? shape::unknown_dim : d.cast<int64_t>());
  return shape(std::move(dims));
}

py::object from_shape(const shape& s) {
  if (!s.has_known_rank())
    return py::none();
  py::list dims;
  for (int64_t d : s.dims())
    dims.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
  return dims;
}

attr_value to_attr(py::handle v, attr_type type, const std::string& attr_name) {
  try {
    switch (type) {
      case attr_type::integer:
        return v.cast<int64_t>();
      case attr_type::real:
        return v.cast<double>();
      case attr_type::boolean:
        return v.cast<bool>();
      case attr_type::string:
        return v.cast<std::string>();
      case attr_type::type:
        return dtype_named(py::str(v));
      case attr_type::shape:
        return to_shape(v);
      case attr_type::tensor:
        return to_tensor(v).copy();
      case attr_type::list_int:
        return v.cast<std::vector<int64_t>>();
      case attr_type::list_real:
        return v.cast<std::vector<double>>();
      case attr_type::list_string:
        return v.cast<std::vector<std::string>>();
      case attr_type::list_type: {
        std::vector<dtype> out;
        for (py::handle t : v)
          out.push_back(dtype_named(py::str(t)));
        return out;
      }
      case attr_type::list_shape: {
        std::vector<shape> out;
        for (py::handle s : v)
          out.push_back(to_shape(s));
        return out;
      }
    }
  } catch (const py::cast_error&) {
  }
  throw py::type_error("attribute '" + attr_name + "' takes " + std::string(to_string(type)) +
                       ", got " + std::string(py::repr(v)));
}

py::object from_attr(const attr_value& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, dtype>)
          return py::str(std::string(name(x)));
        else if constexpr (std::is_same_v<T, shape>)
          return from_shape(x);
        else if constexpr (std::is_same_v<T, tensor>)
          return to_numpy(x);
        else if constexpr (std::is_same_v<T, std::vector<dtype>>) {
          py::list out;
          for (dtype t : x)
            out.append(std::string(name(t)));
          return out;
        } else if constexpr (std::is_same_v<T, std::vector<shape>>) {
          py::list out;
          for (const auto& s : x)
            out.append(from_shape(s));
          return out;
        } else
          return py::cast(x);
      },
      v);
}

void raise(const status& s) {
  py::object make = py::module_::import("runnel.errors").attr("_from_status");
  py::object exc = make(int(s.code()), s.message());
  PyErr_SetObject(exc.get_type().ptr(), exc.ptr());
  throw py::error_already_set();
}

} // namespace runnel::python
