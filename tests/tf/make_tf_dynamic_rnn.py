#!/usr/bin/env python3
"""Writes a frozen TensorFlow 1.x graph of tf.nn.dynamic_rnn for Runnel's import tests, laid out
node for node as TensorFlow 1.15's rnn.py (_dynamic_rnn_loop), tensor_array_ops.py and
control_flow_ops.py (while_loop with maximum_iterations) build it, with the cell's weights
frozen into constants. NumPy computes the expected outputs from the same constants.

usage: make_tf_dynamic_rnn.py OUTDIR
Each graph takes x [batch, 5, 3] with the batch known only at run time (Shape -> StridedSlice ->
Fill zero states) and units 4; OUTDIR/x.npy is a 2x5x3 input. Per graph G, OUTDIR/G.pbtxt and
OUTDIR/G.fetches (the tensors to fetch, one per line: the outputs, then the final state's
tensors), and OUTDIR/G.expected_K.npy for the K-th fetch:
  basic_rnn      dynamic_rnn(BasicRNNCell), the TensorFlow 1.12+ loop (while/iteration_counter,
                 LogicalAnd of two Less, maximum_iterations)
  gru_v15        dynamic_rnn(GRUCell), the TensorFlow 1.5 loop (time, the outputs' flow and the
                 state as loop variables; one Less(time, T)), TensorArrays of unknown element shape
  basic_lstm     dynamic_rnn(BasicLSTMCell): an LSTMStateTuple (c, h), two state variables
  lstm_block     dynamic_rnn(tf.contrib.rnn.LSTMBlockCell): one LSTMBlockCell op a step
  lstm_peephole_projection  dynamic_rnn(LSTMCell(use_peepholes=True, cell_clip=0.25, num_proj=3,
                 proj_clip=0.04)): an output and h of 3, a cell state of 4
  gru_block      dynamic_rnn(tf.contrib.rnn.GRUBlockCellV2): one GRUBlockCell op a step
  stacked        dynamic_rnn(MultiRNNCell([GRUCell, BasicLSTMCell])): three state variables
  bidirectional  bidirectional_dynamic_rnn(GRUCell, BasicLSTMCell): two frames in one graph, the
                 backward one over ReverseV2 of the input and its outputs reversed back
  bidirectional_lengths  bidirectional_dynamic_rnn(BasicLSTMCell, GRUCell, sequence_length=seq_len):
                 ReverseSequence, the shape Assert, zero outputs and held states past a row's
                 length; OUTDIR/G.seq_len.npy holds the lengths (3, 5) to feed as seq_len
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tf_meta_graph import FLOAT, attr, node, shape  # noqa: E402

T_STEPS, INPUT, UNITS, PROJ = 5, 3, 4, 3
PAR = attr("parallel_iterations", "i: 32")


def typ(name, t):
    return attr(name, "type: " + t)


def const(name, dtype, dims, values):
    """A Const; one made inside a loop's body has the body's pivot (the first loop variable's
    Identity) as control input, which puts it in the frame, as TensorFlow's WhileContext does."""
    field = {"DT_FLOAT": "float_val", "DT_INT32": "int_val"}[dtype]
    body = " ".join("%s: %r" % (field, float(v) if dtype == "DT_FLOAT" else int(v))
                    for v in np.asarray(values).reshape(-1))
    inside = "/while/" in name and not name.endswith("/while/iteration_counter")
    pivot = ("^" + name[:name.index("/while/")] + "/while/Identity",) if inside else ()
    return node(name, "Const", pivot, typ("dtype", dtype), attr(
        "value", "tensor { dtype: %s tensor_shape { %s } %s }" % (
            dtype, " ".join("dim { size: %d }" % d for d in dims), body)))


def strided_slice(name, x, begin, end, shrink=1):
    return [const(name + "/stack", "DT_INT32", [1], [begin]),
            const(name + "/stack_1", "DT_INT32", [1], [end]),
            const(name + "/stack_2", "DT_INT32", [1], [1]),
            node(name, "StridedSlice", (x, name + "/stack", name + "/stack_1", name + "/stack_2"),
                 typ("T", "DT_INT32"), typ("Index", "DT_INT32"), attr("begin_mask", "i: 0"),
                 attr("end_mask", "i: 0"), attr("ellipsis_mask", "i: 0"),
                 attr("new_axis_mask", "i: 0"), attr("shrink_axis_mask", "i: %d" % shrink))]


def enter(name, x, t, constant=False):
    frame = name[:name.index("/while/")] + "/while/while_context"
    return node(name, "Enter", (x,), typ("T", t), PAR,
                attr("frame_name", 's: "%s"' % frame),
                attr("is_constant", "b: %s" % ("true" if constant else "false")))


class Cell:
    """A TensorFlow 1.x RNN cell: its frozen weights, its nodes inside the loop, NumPy's step."""

    def __init__(self, kind, rng, inputs=INPUT, path=""):
        """`path`: where a MultiRNNCell puts the cell ("multi_rnn_cell/cell_0/")."""
        self.kind, self.path = kind, path
        self.scope = path + {"rnn": "basic_rnn_cell", "gru": "gru_cell", "lstm": "basic_lstm_cell",
                             "lstm_block": "lstm_cell", "lstm_full": "lstm_cell",
                             "gru_block": "gru_cell"}[kind]
        zero_scope = {"rnn": "BasicRNNCellZeroState", "gru": "GRUCellZeroState",
                      "lstm": "BasicLSTMCellZeroState",
                      "lstm_block": "LSTMBlockCellZeroState",
                      "lstm_full": "LSTMCellZeroState",
                      "gru_block": "GRUBlockCellV2ZeroState"}[kind]
        self.states = 2 if kind.startswith("lstm") else 1  # LSTMStateTuple(c, h)
        # LSTMCell(num_proj=PROJ): the state's h and the output are projected.
        self.output_size = PROJ if kind == "lstm_full" else UNITS
        self.state_sizes = [UNITS, self.output_size][:self.states]
        self.zero_groups = [(zero_scope, self.state_sizes)]
        width = UNITS if kind in ("rnn", "gru", "gru_block") else 4 * UNITS
        u = lambda *dims: rng.uniform(-0.5, 0.5, dims).astype(np.float32)  # noqa: E731
        self.w = {"kernel": u(inputs + self.output_size, width), "bias": u(width) * 0.2}
        if kind == "lstm_full":  # peepholes, cell_clip=0.25, num_proj=PROJ, proj_clip=0.04
            self.w.update({"w_f_diag": u(UNITS), "w_i_diag": u(UNITS), "w_o_diag": u(UNITS),
                           "projection/kernel": u(UNITS, PROJ)})
        if kind in ("gru", "gru_block"):
            self.w = {"gates/kernel": u(inputs + UNITS, 2 * UNITS), "gates/bias": u(2 * UNITS) + 1,
                      "candidate/kernel": u(inputs + UNITS, UNITS), "candidate/bias": u(UNITS)}
        if kind == "gru_block":  # GRUBlockCellV2's names for the same four
            self.w = dict(zip(("w_ru", "b_ru", "w_c", "b_c"), self.w.values()))

    def weights(self, p):
        return [const("%s/%s/%s" % (p, self.scope, k), "DT_FLOAT", v.shape, v)
                for k, v in self.w.items()]

    def body(self, p, x, states):
        """The cell's nodes in loop `p`/while/ on input x and state tensors; -> (output, states)."""
        c = p + "/while/" + self.scope + "/"
        n = []

        def dense(inputs, key, sfx=""):
            """BiasAdd(MatMul(ConcatV2(inputs, 1), kernel), bias): the cell's _linear."""
            weights = "%s/%s/%s" % (p, self.scope, key + "/" if key else "")
            concat, matmul, bias_add = c + "concat" + sfx, c + "MatMul" + sfx, c + "BiasAdd" + sfx
            n.extend([const(concat + "/axis", "DT_INT32", [], [1]),
                      node(concat, "ConcatV2", tuple(inputs) + (concat + "/axis",), FLOAT,
                           attr("N", "i: 2"), typ("Tidx", "DT_INT32")),
                      enter(matmul + "/Enter", weights + "kernel", "DT_FLOAT", True),
                      node(matmul, "MatMul", (concat, matmul + "/Enter"), FLOAT,
                           attr("transpose_a", "b: false"), attr("transpose_b", "b: false")),
                      enter(bias_add + "/Enter", weights + "bias", "DT_FLOAT", True),
                      node(bias_add, "BiasAdd", (matmul, bias_add + "/Enter"), FLOAT,
                           attr("data_format", 's: "NHWC"'))])
            return bias_add

        def op(name, kind, *inputs):
            n.append(node(c + name, kind, inputs, FLOAT))
            return c + name

        if self.kind == "rnn":
            h = op("Tanh", "Tanh", dense((x, states[0]), None))
            return n, h, [h]
        if self.kind == "gru_block":
            # tf.contrib.rnn.GRUBlockCellV2: one GRUBlockCell op; h is its output 3.
            weights = "%s/%s/" % (p, self.scope)
            enters = []
            for k, name in enumerate(("w_ru", "w_c", "b_ru", "b_c")):
                enters.append(c + "GRUBlockCell/Enter" + ("_%d" % k if k else ""))
                n.append(enter(enters[-1], weights + name, "DT_FLOAT", True))
            n.append(node(c + "GRUBlockCell", "GRUBlockCell", (x, states[0]) + tuple(enters),
                          FLOAT))
            return n, c + "GRUBlockCell:3", [c + "GRUBlockCell:3"]
        if self.kind == "gru":
            value = op("Sigmoid", "Sigmoid", dense((x, states[0]), "gates"))
            n += [const(c + "split/split_dim", "DT_INT32", [], [1]),
                  node(c + "split", "Split", (c + "split/split_dim", value), FLOAT,
                       attr("num_split", "i: 2"))]
            r_state = op("mul", "Mul", c + "split", states[0])
            cand = op("Tanh", "Tanh", dense((x, r_state), "candidate", "_1"))
            n += [const(c + "sub/x", "DT_FLOAT", [], [1.0])]
            one_minus_u = op("sub", "Sub", c + "sub/x", c + "split:1")
            h = op("add", "Add", op("mul_1", "Mul", c + "split:1", states[0]),
                   op("mul_2", "Mul", one_minus_u, cand))
            return n, h, [h]
        cs, hs = states
        if self.kind == "lstm_full":
            return self.lstm_cell_body(p, c, n, dense, x, cs, hs)
        if self.kind == "lstm_block":
            # tf.contrib.rnn.LSTMBlockCell: one LSTMBlockCell op, zero peephole weights.
            weights = "%s/%s/" % (p, self.scope)
            n += [const(c + "zeros", "DT_FLOAT", [UNITS], [0.0] * UNITS),
                  enter(c + "LSTMBlockCell/Enter", weights + "kernel", "DT_FLOAT", True),
                  enter(c + "LSTMBlockCell/Enter_1", weights + "bias", "DT_FLOAT", True),
                  node(c + "LSTMBlockCell", "LSTMBlockCell",
                       (x, cs, hs, c + "LSTMBlockCell/Enter", c + "zeros", c + "zeros",
                        c + "zeros", c + "LSTMBlockCell/Enter_1"), FLOAT,
                       attr("forget_bias", "f: 1.0"), attr("cell_clip", "f: -1.0"),
                       attr("use_peephole", "b: false"))]
            return n, c + "LSTMBlockCell:6", [c + "LSTMBlockCell:1", c + "LSTMBlockCell:6"]
        # BasicLSTMCell: i, j, f, o = split(gates, 4); c' = c*sigmoid(f + 1) + sigmoid(i)*tanh(j)
        n += [const(c + "Const", "DT_INT32", [], [1])]
        gates = dense((x, hs), None)
        n += [node(c + "split", "Split", (c + "Const", gates), FLOAT, attr("num_split", "i: 4")),
              const(c + "Const_1", "DT_FLOAT", [], [1.0])]
        forget = op("Sigmoid", "Sigmoid", op("Add", "Add", c + "split:2", c + "Const_1"))
        new_c = op("Add_1", "Add", op("Mul", "Mul", cs, forget),
                   op("Mul_1", "Mul", op("Sigmoid_1", "Sigmoid", c + "split"),
                      op("Tanh", "Tanh", c + "split:1")))
        new_h = op("Mul_2", "Mul", op("Tanh_1", "Tanh", new_c),
                   op("Sigmoid_2", "Sigmoid", c + "split:3"))
        return n, new_h, [new_c, new_h]

    def lstm_cell_body(self, p, c, n, dense, x, cs, hs):
        """tf.nn.rnn_cell.LSTMCell(use_peepholes=True, cell_clip=0.25, num_proj=PROJ,
        proj_clip=0.04): rnn_cell_impl.py's LSTMCell.call, op for op."""
        weights = "%s/%s/" % (p, self.scope)

        def op(name, kind, *inputs):
            n.append(node(c + name, kind, inputs, FLOAT))
            return c + name

        def diag(name):
            n.append(enter(c + name + "/Enter", weights + name, "DT_FLOAT", True))
            return c + name + "/Enter"

        def clip(scope, x, limit):  # clip_ops.clip_by_value: Minimum, then Maximum
            n.extend([const(c + scope + "/Minimum/y", "DT_FLOAT", [], [limit]),
                      const(c + scope + "/y", "DT_FLOAT", [], [-limit])])
            return op(scope, "Maximum", op(scope + "/Minimum", "Minimum", x,
                                           c + scope + "/Minimum/y"), c + scope + "/y")

        gates = dense((x, hs), None)
        n += [const(c + "split/split_dim", "DT_INT32", [], [1]),
              node(c + "split", "Split", (c + "split/split_dim", gates), FLOAT,
                   attr("num_split", "i: 4")),
              const(c + "add/y", "DT_FLOAT", [], [1.0])]
        f = op("add_1", "Add", op("add", "Add", c + "split:2", c + "add/y"),
               op("mul", "Mul", diag("w_f_diag"), cs))
        i = op("add_2", "Add", c + "split", op("mul_2", "Mul", diag("w_i_diag"), cs))
        new_c = op("add_3", "Add", op("mul_1", "Mul", op("Sigmoid", "Sigmoid", f), cs),
                   op("mul_3", "Mul", op("Sigmoid_1", "Sigmoid", i),
                      op("Tanh", "Tanh", c + "split:1")))
        new_c = clip("clip_by_value", new_c, 0.25)
        o = op("add_4", "Add", c + "split:3", op("mul_4", "Mul", diag("w_o_diag"), new_c))
        m = op("mul_5", "Mul", op("Sigmoid_2", "Sigmoid", o), op("Tanh_1", "Tanh", new_c))
        n += [enter(c + "MatMul_1/Enter", weights + "projection/kernel", "DT_FLOAT", True),
              node(c + "MatMul_1", "MatMul", (m, c + "MatMul_1/Enter"), FLOAT,
                   attr("transpose_a", "b: false"), attr("transpose_b", "b: false"))]
        m = clip("clip_by_value_1", c + "MatMul_1", 0.04)
        return n, m, [new_c, m]

    def step(self, x, states):
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        w = self.w
        if self.kind == "lstm_full":
            c, m = states
            i, j, f, o = np.split(np.concatenate([x, m], 1) @ w["kernel"] + w["bias"], 4, 1)
            c = sig(f + 1.0 + w["w_f_diag"] * c) * c + sig(i + w["w_i_diag"] * c) * np.tanh(j)
            c = np.clip(c, -0.25, 0.25)
            m = sig(o + w["w_o_diag"] * c) * np.tanh(c)
            m = np.clip(m @ w["projection/kernel"], -0.04, 0.04)
            return m, [c, m]
        if self.kind == "rnn":
            h = np.tanh(np.concatenate([x, states[0]], 1) @ w["kernel"] + w["bias"])
            return h, [h]
        if self.kind in ("gru", "gru_block"):
            h = states[0]
            gk, gb, ck, cb = (w[k] for k in (("gates/kernel", "gates/bias", "candidate/kernel",
                                               "candidate/bias") if self.kind == "gru" else
                                              ("w_ru", "b_ru", "w_c", "b_c")))
            r, u = np.split(sig(np.concatenate([x, h], 1) @ gk + gb), 2, 1)
            cand = np.concatenate([x, r * h], 1) @ ck + cb
            cand = np.tanh(cand)
            h = u * h + (1 - u) * cand
            return h, [h]
        c, h = states  # BasicLSTMCell and LSTMBlockCell compute the same
        i, j, f, o = np.split(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"], 4, 1)
        c = c * sig(f + 1.0) + sig(i) * np.tanh(j)
        h = np.tanh(c) * sig(o)
        return h, [c, h]


class Multi:
    """tf.nn.rnn_cell.MultiRNNCell(cells): each cell's output the next one's input, in one frame."""

    def __init__(self, kinds, rng):
        self.cells = []
        for i, k in enumerate(kinds):
            inputs = self.cells[-1].output_size if self.cells else INPUT
            self.cells.append(Cell(k, rng, inputs, "multi_rnn_cell/cell_%d/" % i))
        self.states = sum(c.states for c in self.cells)
        self.output_size = self.cells[-1].output_size
        self.state_sizes = [size for c in self.cells for size in c.state_sizes]
        self.zero_groups = [("MultiRNNCellZeroState/" + g, k) for c in self.cells
                            for g, k in c.zero_groups]

    def weights(self, p):
        return [w for c in self.cells for w in c.weights(p)]

    def body(self, p, x, states):
        n, new_states = [], []
        for c in self.cells:
            mine, states = states[:c.states], states[c.states:]
            nodes, x, s = c.body(p, x, mine)
            n += nodes
            new_states += s
        return n, x, new_states

    def step(self, x, states):
        new_states = []
        for c in self.cells:
            mine, states = states[:c.states], states[c.states:]
            x, s = c.step(x, mine)
            new_states += s
        return x, new_states


def loop_var(p, i, init, t):
    """Enter, Merge, Switch, Identity and Exit of loop variable i (TensorFlow's suffixes)."""
    sfx = "" if i == 0 else "_%d" % i
    w = p + "/while/"
    return [enter(w + "Enter" + sfx, init, t),
            node(w + "Merge" + sfx, "Merge", (w + "Enter" + sfx, w + "NextIteration" + sfx),
                 typ("T", t), attr("N", "i: 2")),
            node(w + "Switch" + sfx, "Switch", (w + "Merge" + sfx, w + "LoopCond"), typ("T", t),
                 attr("_class", 'list { s: "loc:@%s" }' % (w + "Merge" + sfx))),
            node(w + "Identity" + sfx, "Identity", (w + "Switch" + sfx + ":1",), typ("T", t)),
            node(w + "Exit" + sfx, "Exit", (w + "Switch" + sfx,), typ("T", t))]


def zero_state(z, k, batch, size):
    """cell.zero_state's k-th tensor under scope z: Fill(ConcatV2(ExpandDims(batch), size), 0)."""
    sfx = "" if k == 0 else "_%d" % k
    return [const(z + "Const" + sfx, "DT_INT32", [1], [size]),
            const(z + "concat%s/axis" % sfx, "DT_INT32", [], [0]),
            const(z + "ExpandDims%s/dim" % sfx, "DT_INT32", [], [0]),
            node(z + "ExpandDims" + sfx, "ExpandDims", (batch, z + "ExpandDims%s/dim" % sfx),
                 typ("T", "DT_INT32"), typ("Tdim", "DT_INT32")),
            node(z + "concat" + sfx, "ConcatV2",
                 (z + "ExpandDims" + sfx, z + "Const" + sfx, z + "concat%s/axis" % sfx),
                 typ("T", "DT_INT32"), attr("N", "i: 2"), typ("Tidx", "DT_INT32")),
            const(z + "zeros%s/Const" % sfx, "DT_FLOAT", [], [0.0]),
            node(z + "zeros" + sfx, "Fill", (z + "concat" + sfx, z + "zeros%s/Const" % sfx),
                 FLOAT, typ("index_type", "DT_INT32"))], z + "zeros" + sfx


def check_sequence_length(p, lengths, output_size):
    """dynamic_rnn's checks of sequence_length: its shape must be [batch] (an Assert the
    CheckSeqLen Identity waits for), then its min and max; -> (nodes, CheckSeqLen, Max)."""
    i32 = typ("T", "DT_INT32")
    strings = lambda name, text: node(name, "Const", (), typ("dtype", "DT_STRING"), attr(  # noqa
        "value", 'tensor { dtype: DT_STRING tensor_shape { } string_val: "%s" }' % text))
    a = p + "/Assert/Assert"
    return [node(p + "/sequence_length", "Identity", (lengths,), i32),
            node(p + "/Shape_1", "Shape", (p + "/sequence_length",), i32,
                 typ("out_type", "DT_INT32")),
            node(p + "/stack", "Pack", (p + "/strided_slice_1",), i32, attr("N", "i: 1"),
                 attr("axis", "i: 0")),
            node(p + "/Equal", "Equal", (p + "/Shape_1", p + "/stack"), i32),
            const(p + "/Const", "DT_INT32", [1], [0]),
            node(p + "/All", "All", (p + "/Equal", p + "/Const"), attr("keep_dims", "b: false"),
                 typ("Tidx", "DT_INT32")),
            strings(a + "/data_0", "Expected shape for Tensor %s/sequence_length:0 is " % p),
            strings(a + "/data_2", " but saw shape: "),
            node(a, "Assert", (p + "/All", a + "/data_0", p + "/stack", a + "/data_2",
                               p + "/Shape_1"),
                 attr("T", "list { type: DT_STRING type: DT_INT32 type: DT_STRING "
                           "type: DT_INT32 }"), attr("summarize", "i: 3")),
            node(p + "/CheckSeqLen", "Identity", (p + "/sequence_length", "^" + a), i32),
            const(p + "/Const_1", "DT_INT32", [1], [0]),
            node(p + "/Min", "Min", (p + "/CheckSeqLen", p + "/Const_1"), i32,
                 attr("keep_dims", "b: false"), typ("Tidx", "DT_INT32")),
            const(p + "/Const_2", "DT_INT32", [1], [0]),
            node(p + "/Max", "Max", (p + "/CheckSeqLen", p + "/Const_2"), i32,
                 attr("keep_dims", "b: false"), typ("Tidx", "DT_INT32")),
            # zero_output: what a step past a row's length writes.
            const(p + "/stack_1/1", "DT_INT32", [], [output_size]),
            node(p + "/stack_1", "Pack", (p + "/strided_slice_1", p + "/stack_1/1"), i32,
                 attr("N", "i: 2"), attr("axis", "i: 0")),
            const(p + "/zeros/Const", "DT_FLOAT", [], [0.0]),
            node(p + "/zeros", "Fill", (p + "/stack_1", p + "/zeros/Const"), FLOAT,
                 typ("index_type", "DT_INT32"))], p + "/CheckSeqLen", p + "/Max"


def dynamic_rnn(p, x, cell, counter=True, lengths=None):
    """tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32) under scope `p`;
    -> (nodes, the outputs [batch, T, units], the final state's tensors)."""
    w = p + "/while/"
    n = cell.weights(p)
    n += [const(p + "/transpose/perm", "DT_INT32", [3], [1, 0, 2]),
          node(p + "/transpose", "Transpose", (x, p + "/transpose/perm"), FLOAT,
               typ("Tperm", "DT_INT32")),
          node(p + "/Shape", "Shape", (p + "/transpose",), FLOAT, typ("out_type", "DT_INT32"))]
    n += strided_slice(p + "/strided_slice", p + "/Shape", 0, 1)    # time steps
    n += strided_slice(p + "/strided_slice_1", p + "/Shape", 1, 2)  # batch
    zeros = []
    for scope, sizes in cell.zero_groups:
        for k, size in enumerate(sizes):
            nodes, zero = zero_state("%s/%s/" % (p, scope), k, p + "/strided_slice_1", size)
            n += nodes
            zeros.append(zero)
    longest = p + "/strided_slice"
    if lengths:
        nodes, lengths, longest = check_sequence_length(p, lengths, cell.output_size)
        n += nodes
    ta = [typ("dtype", "DT_FLOAT"), attr("dynamic_size", "b: false"),
          attr("clear_after_read", "b: true")]
    if counter:  # 1.12+: element shapes known, and said to be identical
        ta.append(attr("identical_element_shapes", "b: true"))
        out_shape, in_shape = shape([-1, cell.output_size]), shape([-1, INPUT])
    else:  # the older layout: element shapes unknown until the first write
        out_shape = in_shape = "shape { unknown_rank: true }"
    n += [const(p + "/time", "DT_INT32", [], [0]),
          node(p + "/TensorArray", "TensorArrayV3", (p + "/strided_slice",), *ta,
               attr("element_shape", out_shape),
               attr("tensor_array_name", 's: "%s/dynamic_rnn/output_0"' % p)),
          node(p + "/TensorArray_1", "TensorArrayV3", (p + "/strided_slice",), *ta,
               attr("element_shape", in_shape),
               attr("tensor_array_name", 's: "%s/dynamic_rnn/input_0"' % p))]
    u = p + "/TensorArrayUnstack/"
    n += [node(u + "Shape", "Shape", (p + "/transpose",), FLOAT, typ("out_type", "DT_INT32"))]
    n += strided_slice(u + "strided_slice", u + "Shape", 0, 1)
    n += [const(u + "range/start", "DT_INT32", [], [0]),
          const(u + "range/delta", "DT_INT32", [], [1]),
          node(u + "range", "Range", (u + "range/start", u + "strided_slice", u + "range/delta"),
               typ("Tidx", "DT_INT32")),
          node(u + "TensorArrayScatter/TensorArrayScatterV3", "TensorArrayScatterV3",
               (p + "/TensorArray_1", u + "range", p + "/transpose", p + "/TensorArray_1:1"),
               FLOAT, attr("_class", 'list { s: "loc:@%s/transpose" }' % p))]
    # The loop's variables: [the iteration counter,] time, the outputs' flow, the states.
    first = 1 if counter else 0
    if counter:  # TensorFlow 1.12+: maximum_iterations = max(1, T), capped at T
        n += [const(p + "/Maximum/x", "DT_INT32", [], [1]),
              node(p + "/Maximum", "Maximum", (p + "/Maximum/x", longest),
                   typ("T", "DT_INT32")),
              node(p + "/Minimum", "Minimum", (p + "/strided_slice", p + "/Maximum"),
                   typ("T", "DT_INT32")),
              const(w + "iteration_counter", "DT_INT32", [], [0])]
        n += loop_var(p, 0, w + "iteration_counter", "DT_INT32")
    n += loop_var(p, first, p + "/time", "DT_INT32")
    n += loop_var(p, first + 1, p + "/TensorArray:1", "DT_FLOAT")
    for k, zero in enumerate(zeros):
        n += loop_var(p, first + 2 + k, zero, "DT_FLOAT")
    sfx = lambda i: "" if i == 0 else "_%d" % i  # noqa: E731
    time = w + "Identity" + sfx(first)
    if counter:
        # while_loop(time < loop_bound, maximum_iterations=T): the counter's test first.
        n += [enter(w + "Less/Enter", p + "/strided_slice", "DT_INT32", True),
              node(w + "Less", "Less", (w + "Merge", w + "Less/Enter"), typ("T", "DT_INT32")),
              enter(w + "Less_1/Enter", p + "/Minimum", "DT_INT32", True),
              node(w + "Less_1", "Less", (w + "Merge_1", w + "Less_1/Enter"),
                   typ("T", "DT_INT32")),
              node(w + "LogicalAnd", "LogicalAnd", (w + "Less", w + "Less_1")),
              node(w + "LoopCond", "LoopCond", (w + "LogicalAnd",)),
              const(w + "add/y", "DT_INT32", [], [1]),
              node(w + "add", "Add", (w + "Identity", w + "add/y"), typ("T", "DT_INT32")),
              node(w + "NextIteration", "NextIteration", (w + "add",), typ("T", "DT_INT32"))]
    else:
        n += [enter(w + "Less/Enter", p + "/strided_slice", "DT_INT32", True),
              node(w + "Less", "Less", (w + "Merge", w + "Less/Enter"), typ("T", "DT_INT32")),
              node(w + "LoopCond", "LoopCond", (w + "Less",))]
    n += [enter(w + "TensorArrayReadV3/Enter", p + "/TensorArray_1", "DT_RESOURCE", True),
          enter(w + "TensorArrayReadV3/Enter_1",
                u + "TensorArrayScatter/TensorArrayScatterV3", "DT_FLOAT", True),
          node(w + "TensorArrayReadV3", "TensorArrayReadV3",
               (w + "TensorArrayReadV3/Enter", time, w + "TensorArrayReadV3/Enter_1"),
               typ("dtype", "DT_FLOAT"))]
    states = [w + "Identity" + sfx(first + 2 + k) for k in range(cell.states)]
    cell_nodes, out, new_states = cell.body(p, w + "TensorArrayReadV3", states)
    n += cell_nodes
    if lengths:
        # _rnn_step(skip_conditionals=True): past a row's length, the zero output and the state
        # as it was, each through a Select of its own GreaterEqual(time, sequence_length).
        n += [enter(w + "GreaterEqual/Enter", lengths, "DT_INT32", True),
              enter(w + "Select/Enter", p + "/zeros", "DT_FLOAT", True)]
        picks = [(w + "Select/Enter", out)] + list(zip(states, new_states))
        chosen = []
        for k, (old_value, new_value) in enumerate(picks):
            ge, sel = w + "GreaterEqual" + sfx(k), w + "Select" + sfx(k)
            n += [node(ge, "GreaterEqual", (time, w + "GreaterEqual/Enter"), typ("T", "DT_INT32")),
                  node(sel, "Select", (ge, old_value, new_value), FLOAT)]
            chosen.append(sel)
        out, new_states = chosen[0], chosen[1:]
    t_next = "add_1" if counter else "add"
    n += [enter(w + "TensorArrayWrite/TensorArrayWriteV3/Enter", p + "/TensorArray",
                "DT_RESOURCE", True),
          node(w + "TensorArrayWrite/TensorArrayWriteV3", "TensorArrayWriteV3",
               (w + "TensorArrayWrite/TensorArrayWriteV3/Enter", time, out,
                w + "Identity" + sfx(first + 1)), FLOAT,
               attr("_class", 'list { s: "loc:@%s" }' % out.split(":")[0])),
          const(w + t_next + "/y", "DT_INT32", [], [1]),
          node(w + t_next, "Add", (time, w + t_next + "/y"), typ("T", "DT_INT32")),
          node(w + "NextIteration" + sfx(first), "NextIteration", (w + t_next,),
               typ("T", "DT_INT32")),
          node(w + "NextIteration" + sfx(first + 1), "NextIteration",
               (w + "TensorArrayWrite/TensorArrayWriteV3",), FLOAT)]
    for k, s in enumerate(new_states):
        n.append(node(w + "NextIteration" + sfx(first + 2 + k), "NextIteration", (s,), FLOAT))
    flow = w + "Exit" + sfx(first + 1)
    s = p + "/TensorArrayStack/"
    n += [node(s + "TensorArraySizeV3", "TensorArraySizeV3", (p + "/TensorArray", flow),
               attr("_class", 'list { s: "loc:@%s/TensorArray" }' % p)),
          const(s + "range/start", "DT_INT32", [], [0]),
          const(s + "range/delta", "DT_INT32", [], [1]),
          node(s + "range", "Range", (s + "range/start", s + "TensorArraySizeV3",
                                      s + "range/delta"), typ("Tidx", "DT_INT32")),
          node(s + "TensorArrayGatherV3", "TensorArrayGatherV3",
               (p + "/TensorArray", s + "range", flow), typ("dtype", "DT_FLOAT"),
               attr("element_shape", out_shape)),
          const(p + "/transpose_1/perm", "DT_INT32", [3], [1, 0, 2]),
          node(p + "/transpose_1", "Transpose",
               (s + "TensorArrayGatherV3", p + "/transpose_1/perm"), FLOAT,
               typ("Tperm", "DT_INT32"))]
    finals = [w + "Exit" + sfx(first + 2 + k) for k in range(cell.states)]
    return n, p + "/transpose_1", finals


def run_numpy(cell, x, lengths=None):
    """The recurrence; past a row's length its output is zero and its state stays."""
    states = [np.zeros((x.shape[0], size), np.float32) for size in cell.state_sizes]
    outs = []
    for t in range(x.shape[1]):
        h, new_states = cell.step(x[:, t], states)
        live = np.ones((x.shape[0], 1), bool) if lengths is None else (t < lengths)[:, None]
        outs.append(np.where(live, h, 0))
        states = [np.where(live, n, o) for n, o in zip(new_states, states)]
    return np.stack(outs, 1), states


def reverse_rows(x, lengths):
    """ReverseSequence along time: each row's first lengths[b] steps reversed."""
    out = x.copy()
    for b, n in enumerate(lengths):
        out[b, :n] = x[b, :n][::-1]
    return out


def write(out, name, nodes, fetches, expected, lengths=None):
    placeholders = [node("x", "Placeholder", (), typ("dtype", "DT_FLOAT"),
                         attr("shape", shape([-1, T_STEPS, INPUT])))]
    if lengths is not None:
        placeholders.append(node("seq_len", "Placeholder", (), typ("dtype", "DT_INT32"),
                                 attr("shape", shape([-1]))))
        np.save(os.path.join(out, name + ".seq_len.npy"), lengths.astype(np.int32))
    with open(os.path.join(out, name + ".pbtxt"), "w") as f:
        f.write("\n".join(placeholders + nodes) + "\nversions { producer: 134 }\n")
    with open(os.path.join(out, name + ".fetches"), "w") as f:
        f.write("\n".join(fetches) + "\n")
    for k, e in enumerate(expected):
        np.save(os.path.join(out, "%s.expected_%d.npy" % (name, k)), e.astype(np.float32))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.RandomState(7)
    x = rng.uniform(-1, 1, (2, T_STEPS, INPUT)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    for name, kind, counter in (("basic_rnn", "rnn", True), ("gru_v15", "gru", False),
                                ("basic_lstm", "lstm", True), ("lstm_block", "lstm_block", True),
                                ("lstm_peephole_projection", "lstm_full", True),
                                ("gru_block", "gru_block", True),
                                ("stacked", ["gru", "lstm"], True)):
        cell = Multi(kind, rng) if isinstance(kind, list) else Cell(kind, rng)
        nodes, outputs, finals = dynamic_rnn("rnn", "x", cell, counter)
        y, states = run_numpy(cell, x)
        write(out, name, nodes, [outputs] + finals, [y] + states)
    # bidirectional_dynamic_rnn(GRUCell, BasicLSTMCell, x): the backward cell runs on ReverseV2(x)
    # along time, and its outputs are reversed back.
    fw, bw = Cell("gru", rng), Cell("lstm", rng)
    b = "bidirectional_rnn/bw/"
    nodes, fw_out, fw_final = dynamic_rnn("bidirectional_rnn/fw/fw", "x", fw)
    nodes += [const(b + "ReverseV2/axis", "DT_INT32", [1], [1]),
              node(b + "ReverseV2", "ReverseV2", ("x", b + "ReverseV2/axis"), FLOAT,
                   typ("Tidx", "DT_INT32"))]
    bw_nodes, bw_out, bw_final = dynamic_rnn(b + "bw", b + "ReverseV2", bw)
    nodes += bw_nodes
    nodes += [const("ReverseV2/axis", "DT_INT32", [1], [1]),
              node("ReverseV2", "ReverseV2", (bw_out, "ReverseV2/axis"), FLOAT,
                   typ("Tidx", "DT_INT32"))]
    y_fw, s_fw = run_numpy(fw, x)
    y_bw, s_bw = run_numpy(bw, x[:, ::-1])
    write(out, "bidirectional", nodes, [fw_out, "ReverseV2"] + fw_final + bw_final,
          [y_fw, y_bw[:, ::-1]] + s_fw + s_bw)
    # The same given sequence_length: ReverseSequence instead of ReverseV2, and each loop copies
    # the state through and writes zeros past a row's length.
    fw, bw = Cell("lstm", rng), Cell("gru", rng)
    lengths = np.array([3, 5], np.int32)
    nodes, fw_out, fw_final = dynamic_rnn("bidirectional_rnn/fw/fw", "x", fw, lengths="seq_len")
    nodes += [node(b + "ReverseSequence", "ReverseSequence", ("x", "seq_len"), FLOAT,
                   typ("Tlen", "DT_INT32"), attr("seq_dim", "i: 1"), attr("batch_dim", "i: 0"))]
    bw_nodes, bw_out, bw_final = dynamic_rnn(b + "bw", b + "ReverseSequence", bw,
                                             lengths="seq_len")
    nodes += bw_nodes
    nodes += [node("ReverseSequence", "ReverseSequence", (bw_out, "seq_len"), FLOAT,
                   typ("Tlen", "DT_INT32"), attr("seq_dim", "i: 1"), attr("batch_dim", "i: 0"))]
    y_fw, s_fw = run_numpy(fw, x, lengths)
    y_bw, s_bw = run_numpy(bw, reverse_rows(x, lengths), lengths)
    write(out, "bidirectional_lengths", nodes,
          [fw_out, "ReverseSequence"] + fw_final + bw_final,
          [y_fw, reverse_rows(y_bw, lengths)] + s_fw + s_bw, lengths)


if __name__ == "__main__":
    main()
