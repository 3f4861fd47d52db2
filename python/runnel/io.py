"""Graph files: Runnel's own, and TensorFlow's frozen GraphDefs (binary .pb or text .pbtxt)."""
from . import _runnel
from . import framework as _fw


def load_graph(path):
    """A Graph from a file Graph.save wrote."""
    return _fw.Graph(_runnel._load_graph(str(path)))


def load_tf_graph(path):
    """A Graph from a TensorFlow GraphDef file: binary, or text for .pbtxt/.pb.txt/.txt (a frozen
    graph: variables already constants). Errors name the node and op that do not import."""
    return _fw.Graph(_runnel._import_tf_graph(str(path)))


def import_graph_def(graph_def, text=False):
    """A new Graph from GraphDef bytes (TensorFlow's tf.import_graph_def imports into the default
    graph; Runnel makes a graph of its own: run it in a Session(graph=...))."""
    if isinstance(graph_def, str):
        graph_def = graph_def.encode()
    return _fw.Graph(_runnel._import_tf_graph_def(bytes(graph_def), bool(text)))
