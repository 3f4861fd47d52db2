"""Each test builds in a fresh default graph."""
import pytest

import runnel as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()
