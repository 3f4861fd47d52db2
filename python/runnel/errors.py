"""Runnel's errors as Python exceptions, named as TensorFlow 1.x names them (tf.errors).

Every failure of a graph build or a step raises an ``OpError`` subclass chosen by its code;
``node_name`` and ``op_type`` name the node at fault when the message does.
"""
import re

OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = 0, 1, 2, 3, 4, 5
ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = 6, 7, 8, 9
ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS = 10, 11, 12, 13, 14, 15
UNAUTHENTICATED = 16

_NODE = re.compile(r"node '([^']+)' \(op ([^)]+)\)")


class OpError(Exception):
    """A failed op or step: ``code`` (TensorFlow's numbers), ``message``, and the node at fault
    (``node_name``, ``op_type``; None when the message names none)."""

    def __init__(self, node_def, op, message, error_code=UNKNOWN):
        super().__init__(message)
        self.message = message
        self.error_code = error_code
        self.node_def = node_def
        self.op = op
        found = _NODE.search(message)
        self.node_name = found.group(1) if found else None
        self.op_type = found.group(2) if found else None

    @property
    def code(self):
        return self.error_code

    def __str__(self):
        return self.message


def _subclass(name, code):
    def __init__(self, node_def=None, op=None, message="", *args):
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "__module__": __name__})


CancelledError = _subclass("CancelledError", CANCELLED)
UnknownError = _subclass("UnknownError", UNKNOWN)
InvalidArgumentError = _subclass("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _subclass("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _subclass("NotFoundError", NOT_FOUND)
AlreadyExistsError = _subclass("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _subclass("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _subclass("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _subclass("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _subclass("AbortedError", ABORTED)
OutOfRangeError = _subclass("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _subclass("UnimplementedError", UNIMPLEMENTED)
InternalError = _subclass("InternalError", INTERNAL)
UnavailableError = _subclass("UnavailableError", UNAVAILABLE)
DataLossError = _subclass("DataLossError", DATA_LOSS)
UnauthenticatedError = _subclass("UnauthenticatedError", UNAUTHENTICATED)

_BY_CODE = {
    cls().error_code: cls
    for cls in (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                NotFoundError, AlreadyExistsError, PermissionDeniedError,
                ResourceExhaustedError, FailedPreconditionError, AbortedError, OutOfRangeError,
                UnimplementedError, InternalError, UnavailableError, DataLossError,
                UnauthenticatedError)
}


def _from_status(code, message):
    """The exception for a failed status (called by the extension module)."""
    return _BY_CODE.get(code, UnknownError)(None, None, message)
