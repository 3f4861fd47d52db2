"""Element types, named as TensorFlow names them (runnel.float32, ...)."""
import numpy as np


class DType:
    """An element type: ``name`` is Runnel's and TensorFlow's name ("float32")."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    @property
    def as_numpy_dtype(self):
        """NumPy's type (bfloat16 has none: float32; strings: object)."""
        return _NUMPY.get(self.name, np.float32)

    @property
    def is_floating(self):
        return self.name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_integer(self):
        return self.name in ("int8", "uint8", "int32", "int64")

    @property
    def base_dtype(self):
        return self

    def __eq__(self, other):
        try:
            return self.name == as_dtype(other).name
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "runnel." + self.name

    __str__ = __repr__


_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64,
          "int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64,
          "bool": np.bool_, "string": np.object_}

float16 = half = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = double = DType("float64")
int8 = DType("int8")
uint8 = DType("uint8")
int32 = DType("int32")
int64 = DType("int64")
bool = DType("bool")  # noqa: A001 (TensorFlow's name)
string = DType("string")

_BY_NAME = {t.name: t for t in (float16, bfloat16, float32, float64, int8, uint8, int32, int64,
                                bool, string)}
_BY_NAME.update({"float": float32, "double": float64, "half": float16})


def as_dtype(value):
    """A DType from a DType, a name, a NumPy dtype or type, or a Python type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        raise TypeError("not a Runnel dtype: %r" % value)
    import builtins
    if value is builtins.float:
        return float32
    if value is builtins.int:
        return int32
    if value is builtins.bool:
        return bool
    if value in (builtins.str, builtins.bytes):
        return string
    try:
        np_type = np.dtype(value)
    except TypeError:
        raise TypeError("not a Runnel dtype: %r" % (value,)) from None
    if np_type.kind in "OSU":
        return string
    name = np_type.name
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise TypeError("NumPy's %s has no Runnel dtype" % name)
