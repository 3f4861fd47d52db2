#pragma once
// The parts of the _runnel extension module, each binding one area of the C++ API.
#include <pybind11/pybind11.h>

#include <string>

namespace runnel {
class runtime;
struct tf_signature;
} // namespace runnel

namespace runnel::python {

void bind_graph(pybind11::module_& m);
void bind_session(pybind11::module_& m);
void bind_train(pybind11::module_& m);
void bind_data(pybind11::module_& m);
void bind_saved_model(pybind11::module_& m);
void bind_control_flow(pybind11::module_& m);
void bind_meta_graph(pybind11::module_& m);
/// The process's runtime, made on first use with the options set_runtime_options gave (never
/// destroyed: its threads may outlive the interpreter's last reference).
runtime& shared_runtime();
/// A SignatureDef for Python: {"method", "inputs", "outputs"}, each tensor as (name with
/// `prefix`, dtype name, shape) (meta_graph_bindings.cpp).
pybind11::dict signature_dict(const tf_signature& sig, const std::string& prefix = "");

} // namespace runnel::python
