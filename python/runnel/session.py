"""Sessions (tf.Session): run fetches given as any nesting of lists, tuples, dicts and
namedtuples of tensors, operations, variables or names; feed NumPy values."""
import concurrent.futures
import threading

from . import _runnel
from . import framework as _fw

_default = threading.local()


def _default_stack():
    if not hasattr(_default, "stack"):
        _default.stack = []
    return _default.stack


def get_default_session():
    s = _default_stack()
    return s[-1] if s else None


def _session_for(session):
    s = session or get_default_session()
    if s is None:
        raise ValueError("no session given and no default session: use `with Session() as s:` "
                         "or pass session=")
    return s


class RunOptions:
    """How a step runs: ``trace_level=RunOptions.FULL_TRACE`` records its node times (into a
    RunMetadata), ``timeout_in_ms`` aborts it with DeadlineExceededError (local sessions)."""
    NO_TRACE, FULL_TRACE = 0, 3

    def __init__(self, trace_level=NO_TRACE, timeout_in_ms=0):
        self.trace_level = trace_level
        self.timeout_in_ms = timeout_in_ms


class RunMetadata:
    """What a traced run recorded: ``chrome_trace``, JSON for Perfetto or chrome://tracing."""

    def __init__(self):
        self.chrome_trace = None


class _Fetches:
    """The flat tensors and targets of a nested fetch structure, and how to rebuild it."""

    def __init__(self, graph, fetches):
        self.graph = graph
        self.tensors, self.targets = [], []
        self._index = {}
        self.structure = self._flatten(fetches)

    def _leaf(self, f):
        el = self.graph.as_graph_element(f)
        if el.graph is not self.graph:
            raise ValueError("fetch %r belongs to another graph than the session's" % (f,))
        if isinstance(el, _fw.Operation):
            self.targets.append(el._op)
            return ("op",)
        key = el.name
        if key not in self._index:
            self._index[key] = len(self.tensors)
            self.tensors.append(el._t)
        return ("t", self._index[key])

    def _flatten(self, f):
        if isinstance(f, dict):
            return ("dict", type(f), [(k, self._flatten(v)) for k, v in f.items()])
        if isinstance(f, tuple) and hasattr(f, "_fields"):
            return ("namedtuple", type(f), [self._flatten(v) for v in f])
        if isinstance(f, (list, tuple)):
            return ("seq", type(f), [self._flatten(v) for v in f])
        if f is None:
            raise TypeError("fetch argument None is not a tensor or an operation")
        return self._leaf(f)

    def build(self, values, node=None):
        node = self.structure if node is None else node
        kind = node[0]
        if kind == "op":
            return None
        if kind == "t":
            return values[node[1]]
        if kind == "dict":
            return node[1]((k, self.build(values, v)) for k, v in node[2])
        if kind == "namedtuple":
            return node[1](*[self.build(values, v) for v in node[2]])
        return node[1](self.build(values, v) for v in node[2])


_runnel._set_tensor_class(_fw.Tensor)  # what Session.run's fast path recognises


class Session:
    """Runs a graph: locally, or on a cluster when ``target`` is "runnel://host:port".

    ``config`` is a dict of session options: allow_soft_placement, placement ("first_feasible"
    or "cost_model"), max_in_flight_steps, auth_token, remote_timeout (s), tls_cert, tls_key,
    tls_ca. The GIL is released while a step runs, so threads may run steps at once; Ctrl-C
    interrupts a step (KeyboardInterrupt), on a cluster by asking the master to cancel the
    session's steps in flight."""

    def __init__(self, target="", graph=None, config=None):
        self.graph = graph or _fw.get_default_graph()
        self._s = _runnel._Session(self.graph._g, target or "", dict(config or {}))
        self._pool = None
        self._pool_lock = threading.Lock()

    # run(fetches, feed_dict=None, options=None, run_metadata=None) is C++'s (installed below):
    # it takes the common case (one tensor fetched, at most one fed, nothing else) in one call
    # and hands the rest to _run.
    def _run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if options is None:
            if type(fetches) is _fw.Tensor and fetches.graph is self.graph:
                return self._s.run([fetches._t], [], self._feeds(feed_dict), 0.0, False)[0]
        f = _Fetches(self.graph, fetches)
        feeds = self._feeds(feed_dict)
        trace = bool(options and options.trace_level)
        timeout = (options.timeout_in_ms / 1000.0) if options and options.timeout_in_ms else 0.0
        out = self._s.run(f.tensors, f.targets, feeds, timeout, trace)
        if trace:
            out, chrome = out
            if run_metadata is not None:
                run_metadata.chrome_trace = chrome
        return f.build(out)

    def _feeds(self, feed_dict):
        feeds = []
        for key, value in (feed_dict or {}).items():
            if type(key) is _fw.Tensor and key.graph is self.graph:
                feeds.append((key._t, value))
                continue
            el = self.graph.as_graph_element(key)
            if isinstance(el, _fw.Operation):
                raise TypeError("cannot feed operation '%s': feed its output, e.g. '%s:0'" %
                                (el.name, el.name))
            if el.graph is not self.graph:
                raise ValueError("cannot feed '%s': it belongs to another graph" % el.name)
            feeds.append((el._t, value))
        return feeds

    def run_async(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Starts ``run`` and returns a concurrent.futures.Future of its result."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=8, thread_name_prefix="runnel-run")
        return self._pool.submit(self.run, fetches, feed_dict, options, run_metadata)

    def close(self):
        """Waits for steps in flight, then stops; later runs raise CancelledError."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._s.close()

    @property
    def closed(self):
        return self._s.closed

    def as_default(self):
        return _DefaultSession(self)

    def __enter__(self):
        _default_stack().append(self)
        self._graph_ctx = self.graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._graph_ctx.__exit__(*exc)
        _default_stack().pop()
        self.close()
        return False

    def __del__(self):
        try:
            self._s.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


_runnel._install_run(Session)  # Session.run: C++'s session_run (python/src/session_bindings.cpp)


class _DefaultSession:
    def __init__(self, s):
        self.s = s

    def __enter__(self):
        _default_stack().append(self.s)
        return self.s

    def __exit__(self, *exc):
        _default_stack().pop()
        return False


class InteractiveSession(Session):
    """A Session that makes itself the default when made (for notebooks and shells)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        _default_stack().append(self)

    def close(self):
        if self in _default_stack():
            _default_stack().remove(self)
        super().close()
