#pragma once
// Conversions between Python and Runnel: NumPy arrays and tensors (without a copy where the
// layout allows), attribute values, and statuses as Python exceptions (runnel.errors).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>

#include "runnel/ops/core/attr.hpp"
#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "runnel/ops/graph/graph.hpp"

namespace runnel::python {

namespace py = pybind11;

/// A graph shared by the Python objects that point into it (tensors, operations, sessions), so
/// none outlives it.
using graph_ptr = std::shared_ptr<graph>;

/// A graph made or loaded from Python. Each keeps its stateful resources (variables, queues,
/// accumulators) in a container of its own in the process's runtime, as each TensorFlow session
/// does, so that two graphs may both hold a "w".
graph_ptr adopt_graph(graph g);
/// Gives every node of `g` added since the last call whose op has a `container` attribute left
/// empty the graph's container (before a run builds kernels for them).
void assign_containers(graph& g);

/// A tensor of a graph (TensorFlow's tf.Tensor): a node's output.
struct py_tensor {
  graph_ptr g;
  output o;
};
/// A node of a graph used as a target (tf.Operation).
struct py_operation {
  graph_ptr g;
  operation op;
};

/// The dtype named `name` ("float32", ...); an error names it.
dtype dtype_named(const std::string& name);
/// NumPy's dtype for `t` (bfloat16 has none: float32; strings: object).
py::dtype numpy_dtype(dtype t);
/// `value` (an array or anything np.asarray takes) as a tensor of dtype `want` (invalid: the
/// array's own). A C-contiguous array of the right numeric dtype is borrowed, not copied
/// (tensor::borrow); strings, bfloat16 and other layouts are copied.
tensor to_tensor(py::handle value, dtype want = dtype::invalid);
/// `t` as a NumPy array viewing its buffer: read-only unless nothing else holds the buffer.
/// bfloat16 (as float32) and strings (as an object array of bytes) are copied.
py::object to_numpy(tensor t);
/// An attribute value of declared type `type` from a Python value (dtypes by name, shapes as
/// lists with -1 or None for unknown dimensions, None for an unknown rank).
attr_value to_attr(py::handle value, attr_type type, const std::string& attr_name);
py::object from_attr(const attr_value& v);
/// A shape from None (unknown rank) or a sequence of ints/None.
shape to_shape(py::handle value);
py::object from_shape(const shape& s);

/// Raises the runnel.errors exception for `s` (OpError subclasses by code).
[[noreturn]] void raise(const status& s);
inline void check(const status& s) {
  if (!s.ok())
    raise(s);
}
template <class T> T check(result<T> r) {
  if (!r.ok())
    raise(r.error());
  return std::move(r).value();
}

} // namespace runnel::python
