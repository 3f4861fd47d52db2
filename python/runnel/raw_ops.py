"""Every op Runnel defines, as a function generated from its definition (tf.raw_ops):
``raw_ops.MatMul(a, b, transpose_b=True)``. Inputs are positional or by their argument names,
attributes are keywords, ``name=`` names the node; type and list-length attributes are inferred
from the inputs, as TensorFlow does. One output gives a Tensor, several a tuple, none the
Operation. ``runnel.gen_ops`` holds the same functions under snake_case names (mat_mul)."""
import re
import sys

from . import _runnel
from . import dtypes as _dtypes
from . import framework as _fw


def _snake(name):
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name.lstrip("_"))
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return ("_" if name.startswith("_") else "") + s.lower()


def _as_ref(value):
    """A ref input takes a Variable's node, not its value."""
    return value._ref() if hasattr(value, "_ref") else value


def _convert_inputs(defn, values, attrs, graph):
    """The flat input tensors; fills the type and number attributes they imply."""
    types = {}
    for spec, value in zip(defn["inputs"], values):  # tensors first: they fix type attributes
        if spec["type_attr"] and not (spec["number_attr"] or spec["type_list_attr"]):
            v = _as_ref(value) if spec["is_ref"] else value
            if isinstance(v, _fw.Tensor) or hasattr(v, "_as_graph_element"):
                types.setdefault(spec["type_attr"], _fw.convert_to_tensor(v).dtype)
    for name, value in attrs.items():
        if value is not None and any(a["name"] == name and a["type"] == "type"
                                     for a in defn["attrs"]):
            types[name] = _dtypes.as_dtype(value)
    flat = []
    for spec, value in zip(defn["inputs"], values):
        if spec["number_attr"] or spec["type_list_attr"]:
            if not isinstance(value, (list, tuple)):
                raise TypeError("%s: input '%s' takes a list of tensors" %
                                (defn["name"], spec["name"]))
            want = types.get(spec["type_attr"]) or (spec["type"] and _dtypes.as_dtype(spec["type"]))
            ts = [_fw.convert_to_tensor(v, dtype=want or None, graph=graph) for v in value]
            if ts and want is None and spec["type_attr"]:
                types[spec["type_attr"]] = ts[0].dtype
            if spec["number_attr"]:
                attrs.setdefault(spec["number_attr"], len(ts))
            if spec["type_list_attr"]:
                attrs.setdefault(spec["type_list_attr"], [t.dtype.name for t in ts])
            flat.extend(ts)
            continue
        v = _as_ref(value) if spec["is_ref"] else value
        want = spec["type"] or types.get(spec["type_attr"])
        t = _fw.convert_to_tensor(v, dtype=want, graph=graph)
        if spec["type_attr"]:
            types.setdefault(spec["type_attr"], t.dtype)
        flat.append(t)
    return flat


def _make(defn):
    op_type = defn["name"]
    input_names = [a["name"] for a in defn["inputs"]]
    attr_types = {a["name"]: a["type"] for a in defn["attrs"]}

    def op(*args, name=None, **kwargs):
        if len(args) > len(input_names):
            raise TypeError("%s takes %d inputs (%s), got %d" %
                            (op_type, len(input_names), ", ".join(input_names), len(args)))
        values = list(args)
        for n in input_names[len(args):]:
            if n not in kwargs:
                raise TypeError("%s: missing input '%s'" % (op_type, n))
            values.append(kwargs.pop(n))
        for k in kwargs:
            if k not in attr_types:
                raise TypeError("%s has no input or attribute '%s'" % (op_type, k))
        attrs = {}
        for k, v in kwargs.items():
            if attr_types[k] == "type":
                v = _dtypes.as_dtype(v).name
            elif attr_types[k] == "list(type)":
                v = [_dtypes.as_dtype(t).name for t in v]
            attrs[k] = v
        graph = _fw.graph_of(values)
        flat = _convert_inputs(defn, values, attrs, graph)
        outs = graph._build(op_type, name or op_type, flat, attrs)
        if isinstance(outs, _fw.Operation):
            return outs
        return outs[0] if len(outs) == 1 else tuple(outs)

    op.__name__ = op_type
    op.__qualname__ = op_type
    doc = ["%s(%s)" % (op_type, ", ".join(input_names + ["name=None"] + [
        "%s=%r" % (a["name"], a["default"]) if a["has_default"] else a["name"] + "=..."
        for a in defn["attrs"]]))]
    doc.append("Inputs: " + (", ".join("%s (%s)" % (a["name"], a["type"] or a["type_attr"] or
                                                   a["type_list_attr"]) for a in defn["inputs"])
                             or "none"))
    doc.append("Outputs: " + (", ".join(a["name"] for a in defn["outputs"]) or "none"))
    op.__doc__ = "\n".join(doc)
    return op


OP_DEFS = {d["name"]: d for d in _runnel._op_defs()}
_module = sys.modules[__name__]
SNAKE_NAMES = {}
for _name, _defn in OP_DEFS.items():
    _fn = _make(_defn)
    setattr(_module, _name, _fn)
    SNAKE_NAMES[_snake(_name)] = _fn
del _name, _defn, _fn
