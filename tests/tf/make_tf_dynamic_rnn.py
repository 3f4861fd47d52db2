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
                 state as loop variables; one Less(time, T))
  basic_lstm     dynamic_rnn(BasicLSTMCell): an LSTMStateTuple (c, h), two state variables
  bidirectional  bidirectional_dynamic_rnn(GRUCell, BasicLSTMCell): two frames in one graph, the
                 backward one over ReverseV2 of the input and its outputs reversed back
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tf_meta_graph import FLOAT, attr, node, shape  # noqa: E402

T_STEPS, INPUT, UNITS = 5, 3, 4
PAR = attr("parallel_iterations", "i: 32")


def typ(name, t):
    return attr(name, "type: " + t)


def const(name, dtype, dims, values):
    field = {"DT_FLOAT": "float_val", "DT_INT32": "int_val"}[dtype]
    body = " ".join("%s: %r" % (field, float(v) if dtype == "DT_FLOAT" else int(v))
                    for v in np.asarray(values).reshape(-1))
    return node(name, "Const", (), typ("dtype", dtype), attr(
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

    def __init__(self, kind, rng):
        self.kind = kind
        self.scope = {"rnn": "basic_rnn_cell", "gru": "gru_cell", "lstm": "basic_lstm_cell"}[kind]
        self.zero_scope = {"rnn": "BasicRNNCellZeroState", "gru": "GRUCellZeroState",
                           "lstm": "BasicLSTMCellZeroState"}[kind]
        self.states = 2 if kind == "lstm" else 1  # LSTMStateTuple(c, h)
        width = {"rnn": UNITS, "gru": 2 * UNITS, "lstm": 4 * UNITS}[kind]
        u = lambda *dims: rng.uniform(-0.5, 0.5, dims).astype(np.float32)  # noqa: E731
        self.w = {"kernel": u(INPUT + UNITS, width), "bias": u(width) * 0.2}
        if kind == "gru":
            self.w = {"gates/kernel": u(INPUT + UNITS, 2 * UNITS), "gates/bias": u(2 * UNITS) + 1,
                      "candidate/kernel": u(INPUT + UNITS, UNITS), "candidate/bias": u(UNITS)}

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
        # BasicLSTMCell: i, j, f, o = split(gates, 4); c' = c*sigmoid(f + 1) + sigmoid(i)*tanh(j)
        cs, hs = states
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

    def step(self, x, states):
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        w = self.w
        if self.kind == "rnn":
            h = np.tanh(np.concatenate([x, states[0]], 1) @ w["kernel"] + w["bias"])
            return h, [h]
        if self.kind == "gru":
            h = states[0]
            gates = np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"]
            r, u = np.split(sig(gates), 2, 1)
            cand = np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"]
            cand = np.tanh(cand)
            h = u * h + (1 - u) * cand
            return h, [h]
        c, h = states
        i, j, f, o = np.split(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"], 4, 1)
        c = c * sig(f + 1.0) + sig(i) * np.tanh(j)
        h = np.tanh(c) * sig(o)
        return h, [c, h]


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


def dynamic_rnn(p, x, cell, counter=True):
    """tf.nn.dynamic_rnn(cell, x, dtype=tf.float32) under scope `p`; -> (nodes, the outputs
    [batch, T, units], the final state's tensors)."""
    w = p + "/while/"
    n = cell.weights(p)
    n += [const(p + "/transpose/perm", "DT_INT32", [3], [1, 0, 2]),
          node(p + "/transpose", "Transpose", (x, p + "/transpose/perm"), FLOAT,
               typ("Tperm", "DT_INT32")),
          node(p + "/Shape", "Shape", (p + "/transpose",), FLOAT, typ("out_type", "DT_INT32"))]
    n += strided_slice(p + "/strided_slice", p + "/Shape", 0, 1)    # time steps
    n += strided_slice(p + "/strided_slice_1", p + "/Shape", 1, 2)  # batch
    z = "%s/%s/" % (p, cell.zero_scope)
    zeros = []
    for k in range(cell.states):
        sfx = "" if k == 0 else "_%d" % k
        n += [const(z + "Const" + sfx, "DT_INT32", [1], [UNITS]),
              const(z + "concat%s/axis" % sfx, "DT_INT32", [], [0]),
              const(z + "ExpandDims%s/dim" % sfx, "DT_INT32", [], [0]),
              node(z + "ExpandDims" + sfx, "ExpandDims",
                   (p + "/strided_slice_1", z + "ExpandDims%s/dim" % sfx),
                   typ("T", "DT_INT32"), typ("Tdim", "DT_INT32")),
              node(z + "concat" + sfx, "ConcatV2",
                   (z + "ExpandDims" + sfx, z + "Const" + sfx, z + "concat%s/axis" % sfx),
                   typ("T", "DT_INT32"), attr("N", "i: 2"), typ("Tidx", "DT_INT32")),
              const(z + "zeros%s/Const" % sfx, "DT_FLOAT", [], [0.0]),
              node(z + "zeros" + sfx, "Fill", (z + "concat" + sfx, z + "zeros%s/Const" % sfx),
                   FLOAT, typ("index_type", "DT_INT32"))]
        zeros.append(z + "zeros" + sfx)
    ta = [typ("dtype", "DT_FLOAT"), attr("dynamic_size", "b: false"),
          attr("clear_after_read", "b: true"), attr("identical_element_shapes", "b: true")]
    n += [const(p + "/time", "DT_INT32", [], [0]),
          node(p + "/TensorArray", "TensorArrayV3", (p + "/strided_slice",), *ta,
               attr("element_shape", shape([-1, UNITS])),
               attr("tensor_array_name", 's: "%s/dynamic_rnn/output_0"' % p)),
          node(p + "/TensorArray_1", "TensorArrayV3", (p + "/strided_slice",), *ta,
               attr("element_shape", shape([-1, INPUT])),
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
              node(p + "/Maximum", "Maximum", (p + "/Maximum/x", p + "/strided_slice"),
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
        n += [enter(w + "Less/Enter", p + "/Minimum", "DT_INT32", True),
              node(w + "Less", "Less", (w + "Merge", w + "Less/Enter"), typ("T", "DT_INT32")),
              enter(w + "Less_1/Enter", p + "/strided_slice", "DT_INT32", True),
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
    t_next = "add_1" if counter else "add"
    n += [enter(w + "TensorArrayWrite/TensorArrayWriteV3/Enter", p + "/TensorArray",
                "DT_RESOURCE", True),
          node(w + "TensorArrayWrite/TensorArrayWriteV3", "TensorArrayWriteV3",
               (w + "TensorArrayWrite/TensorArrayWriteV3/Enter", time, out,
                w + "Identity" + sfx(first + 1)), FLOAT,
               attr("_class", 'list { s: "loc:@%s" }' % out)),
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
               attr("element_shape", shape([-1, UNITS]))),
          const(p + "/transpose_1/perm", "DT_INT32", [3], [1, 0, 2]),
          node(p + "/transpose_1", "Transpose",
               (s + "TensorArrayGatherV3", p + "/transpose_1/perm"), FLOAT,
               typ("Tperm", "DT_INT32"))]
    finals = [w + "Exit" + sfx(first + 2 + k) for k in range(cell.states)]
    return n, p + "/transpose_1", finals


def run_numpy(cell, x):
    states = [np.zeros((x.shape[0], UNITS), np.float32) for _ in range(cell.states)]
    outs = []
    for t in range(x.shape[1]):
        h, states = cell.step(x[:, t], states)
        outs.append(h)
    return np.stack(outs, 1), states


def write(out, name, nodes, fetches, expected):
    placeholder = node("x", "Placeholder", (), typ("dtype", "DT_FLOAT"),
                       attr("shape", shape([-1, T_STEPS, INPUT])))
    with open(os.path.join(out, name + ".pbtxt"), "w") as f:
        f.write("\n".join([placeholder] + nodes) + "\nversions { producer: 134 }\n")
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
                                ("basic_lstm", "lstm", True)):
        cell = Cell(kind, rng)
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


if __name__ == "__main__":
    main()
