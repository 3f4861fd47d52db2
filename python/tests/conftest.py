"""Each test builds in a fresh default graph; `ctrl_c` presses Ctrl-C for a test."""
import contextlib
import os
import signal
import threading

import pytest

import runnel as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


@pytest.fixture
def ctrl_c():
    """A context manager: SIGINT sent to this process every 50 ms until the first one raises
    KeyboardInterrupt in the main thread (a step that ignores them hangs the test); later ones,
    until the block ends, are ignored, so none lands after the one the test expects."""
    @contextlib.contextmanager
    def pressing():
        raised = threading.Event()

        def handler(signum, frame):
            if not raised.is_set():
                raised.set()
                raise KeyboardInterrupt

        def press():
            while not raised.wait(0.05):
                os.kill(os.getpid(), signal.SIGINT)

        previous = signal.signal(signal.SIGINT, handler)
        t = threading.Thread(target=press)
        t.start()
        try:
            yield
        finally:
            raised.set()
            t.join()
            signal.signal(signal.SIGINT, previous)
    return pressing
