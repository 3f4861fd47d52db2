#!/usr/bin/env bash
# Runs the `runnel` tool on real files and checks its output and exit statuses.
#   cli_test.sh RUNNEL_BINARY WORK_DIR [TESTDATA_DIR]
set -uo pipefail
runnel=$1
work=$2
testdata=${RUNNEL_TESTDATA:-${3:-}}
mkdir -p "$work"
failures=0
check() { # check NAME EXPECTED_STATUS PATTERN -- COMMAND...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $want ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: status $got (want $want), output:"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

# A checkpoint and a graph to look at, written by the Python h5py and by the demo app.
/usr/bin/python3 - "$work/weights.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["dense/kernel:0"] = np.arange(6, dtype=np.float32).reshape(2, 3)
    f["dense/bias:0"] = np.array([1.5, -1.5], dtype=np.float64)
    f.attrs["global_step"] = np.int64(42)
PY
check "ckpt inspect" 0 "dense/kernel +float32 +\[2,3\]" -- "$runnel" ckpt inspect "$work/weights.h5"
check "ckpt step" 0 "global_step: 42" -- "$runnel" ckpt inspect "$work/weights.h5"
check "ckpt values" 0 "min 0 +max 5 +mean 2.5" -- "$runnel" ckpt inspect "$work/weights.h5" --values
check "ckpt missing" 1 "NOT_FOUND: cannot open checkpoint /nonexistent.h5" -- "$runnel" ckpt inspect /nonexistent.h5
echo "not hdf5" > "$work/notes.h5"
check "ckpt foreign" 1 "DATA_LOSS: .*notes.h5 is not an HDF5 file" -- "$runnel" ckpt inspect "$work/notes.h5"
check "ckpt usage" 2 "ckpt inspect needs a FILE" -- "$runnel" ckpt inspect
check "ckpt help" 0 "usage: runnel ckpt inspect" -- "$runnel" ckpt inspect --help
check "ckpt json" 0 '^\{"checkpoint":".*weights.h5","global_step":42,"variables":\[\{"name":"dense/bias","dtype":"float64","shape":\[2\]\}' -- "$runnel" ckpt inspect "$work/weights.h5" --json
# A folder: the checkpoint its state file names; a dataset of a type Runnel cannot read is
# listed as such.
mkdir -p "$work/ckdir"
/usr/bin/python3 - "$work/ckdir/model-7.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["w:0"] = np.ones((2, 2), dtype=np.float32)
    f["pairs"] = np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])
    f.attrs["global_step"] = np.int64(7)
PY
printf 'model_checkpoint_path: "model-7.h5"\nall_model_checkpoint_paths: "model-7.h5"\n' > "$work/ckdir/checkpoint"
check "ckpt dir" 0 "checkpoint: .*ckdir/model-7.h5" -- "$runnel" ckpt inspect "$work/ckdir"
check "ckpt unsupported type" 0 "pairs +\? +\[3\]  \(" -- "$runnel" ckpt inspect "$work/ckdir"
# TensorFlow V2 checkpoints (written by tests/tf/make_tf_checkpoint.py's own encoders).
/usr/bin/python3 "$(dirname "$0")/../tf/make_tf_checkpoint.py" "$work/tfckpt"
tfp="$work/tfckpt/plain/model.ckpt-1234"
check "ckpt tf inspect" 0 "dense/kernel +float32 +\[3,4\]" -- "$runnel" ckpt inspect "$tfp"
check "ckpt tf step" 0 "global_step: 1234" -- "$runnel" ckpt inspect "$tfp.index"
check "ckpt tf dir" 0 "checkpoint: .*tfckpt/plain/model.ckpt-1234" -- "$runnel" ckpt inspect "$work/tfckpt/plain"
check "ckpt tf values" 0 "vocab +string +\[3\]" -- "$runnel" ckpt inspect "$work/tfckpt/blocks/model.ckpt-1234" --values
check "ckpt convert to h5" 0 "wrote 36 variables" -- "$runnel" ckpt convert "$tfp" "$work/tf.h5"
check "ckpt convert to tf" 0 "wrote 36 variables" -- "$runnel" ckpt convert "$work/tf.h5" "$work/back/model.ckpt-1234"
check "ckpt convert exact" 0 "" -- cmp "$tfp.index" "$work/back/model.ckpt-1234.index"
check "ckpt verify tf" 1 "BAD .*model.ckpt-1000" -- "$runnel" ckpt verify "$work/tfckpt/plain"
check "ckpt convert usage" 2 "ckpt convert needs FROM and TO" -- "$runnel" ckpt convert "$tfp"
# A MetaGraphDef (tests/tf/make_tf_meta_graph.py: TensorFlow's layout, encoded by protoc).
/usr/bin/python3 "$(dirname "$0")/../tf/make_tf_meta_graph.py" "$work/tfmeta" "$(dirname "$0")/../../storage/tf"
check "graph import meta" 0 "variables \(2\): w, b" -- "$runnel" graph import "$work/tfmeta/model.ckpt-5.meta"
check "graph import meta savers" 0 "savers left out: save, save_1 \(its restore op: save/restore_all\)" -- "$runnel" graph import "$work/tfmeta/model.ckpt-5.meta"
check "graph import meta checkpoint" 0 "checkpoint beside it: .*tfmeta/model.ckpt-5" -- "$runnel" graph import "$work/tfmeta/model.ckpt-5.meta"
# A SavedModel (tests/tf/make_tf_saved_model.py): listed, and its signatures run on NumPy files.
/usr/bin/python3 "$(dirname "$0")/../tf/make_tf_saved_model.py" "$work/tfsaved" "$(dirname "$0")/../../storage/tf"
sm=$work/tfsaved/model
check "saved model show" 0 "input  h: MatMul:0 float32\[\?,2\]" -- "$runnel" graph import "$sm"
check "saved model tag sets" 0 "tags: train" -- "$runnel" graph import "$sm" --tags train
check "saved model run" 0 "^y = float32\[4,2\] \[\[9, 8.25\], \[10, 9.25\]" -- "$runnel" run "$sm" --feed "x=$work/tfsaved/x.npy"
check "saved model run out" 0 "y -> .*from_h.npy \(float32\[2,2\]\)" -- "$runnel" run "$sm" --signature=from_hidden --feed "h=$work/tfsaved/h.npy" --fetch y --out "$work/from_h.npy"
check "saved model run exact" 0 "" -- /usr/bin/python3 -c "import numpy as np, sys; sys.exit(not np.allclose(np.load('$work/from_h.npy'), np.load('$work/tfsaved/expected_from_h.npy'), atol=1e-5))"
check "saved model tags" 1 "no MetaGraph has the tags \{serve, gpu\}; its tag sets are:" -- "$runnel" run "$sm" --tags serve,gpu --feed "x=$work/tfsaved/x.npy"
check "saved model signature" 1 "no signature 'predict' .*its signatures: classify, from_hidden, serving_default" -- "$runnel" run "$sm" --signature predict --feed "x=$work/tfsaved/x.npy"
check "saved model feed key" 1 "signature 'serving_default' has no input 'images'; its inputs: x" -- "$runnel" run "$sm" --feed "images=$work/tfsaved/x.npy"
check "saved model no signatures" 1 "has no signatures" -- "$runnel" run "$sm" --tags train --feed "x=$work/tfsaved/x.npy"
check "saved model batch" 2 "--batch is for graph files, not SavedModels" -- "$runnel" run "$sm" --batch 2 --feed "x=$work/tfsaved/x.npy"
check "signature on a graph" 2 "--signature and --tags are for SavedModel directories" -- "$runnel" run "$work/tfmeta/model.ckpt-5.meta" --signature s --fetch y
# A frozen bidirectional dynamic_rnn (tests/tf/make_tf_dynamic_rnn.py): its two frames listed.
/usr/bin/python3 "$(dirname "$0")/../tf/make_tf_dynamic_rnn.py" "$work/tfrnn"
check "graph dump frames" 0 "^# frame bidirectional_rnn/bw/bw/while/while_context: [0-9]+ nodes, in the top level, parallel_iterations 32, condition bidirectional_rnn/bw/bw/while/LoopCond" -- "$runnel" graph dump "$work/tfrnn/bidirectional.pbtxt"
check "graph dump optimized loops" 0 "^# frame bidirectional_rnn/bw/bw/while/while_context: [0-9]+ nodes" -- env -u RUNNEL_GRAPH_OPTIMIZER "$runnel" graph dump "$work/tfrnn/bidirectional.pbtxt" --optimized
check "run dynamic_rnn" 0 "^rnn/while/Exit_3 = float32\[2,4\]" -- "$runnel" run "$work/tfrnn/basic_rnn.pbtxt" --feed "x=$work/tfrnn/x.npy" --fetch rnn/while/Exit_3
# Partitioned variables (slices) read whole.
check "ckpt tf partitioned" 0 "emb +float32 +\[5,3\]" -- "$runnel" ckpt inspect "$work/tfckpt/partitioned/model.ckpt-7"
check "ckpt tf partitioned values" 0 "min 0  max 70  mean 35" -- "$runnel" ckpt inspect "$work/tfckpt/partitioned/model.ckpt-7" --values
check "ckpt tf partitioned convert" 0 "wrote 4 variables" -- "$runnel" ckpt convert "$work/tfckpt/partitioned/model.ckpt-7" "$work/partitioned.h5"
check "unknown command" 2 "unknown command 'frobnicate'" -- "$runnel" frobnicate
check "help" 0 "graph dump FILE" -- "$runnel" --help
# `runnel --help` is the whole reference: every option any command takes is in it.
help_text=$("$runnel" --help)
for opt in $(ls "$(dirname "$0")/../../apps/cli/"*.cpp | grep -v runnel_node | xargs grep -ohE -- '"--[a-z][a-z-]+' | tr -d '"' | sort -u); do
  grep -qF -- "$opt" <<<"$help_text" || { echo "FAIL --help omits $opt"; failures=$((failures + 1)); }
done
check "ops" 0 "^MatMul +math +CPU +GPU +yes" -- "$runnel" ops
check "ops one" 0 "attr transpose_a: bool = false" -- "$runnel" ops MatMul
check "ops unknown" 1 "NOT_FOUND: no op named 'Matmul' \(similar: BatchMatMul, MatMul" -- "$runnel" ops Matmul
check "ops json" 0 '^\{"name":"Relu","family":"math","inputs":\["x: T"\]' -- "$runnel" ops Relu --json
check "ops tensorflow" 0 "^nn +Conv2D +yes" -- "$runnel" ops --tensorflow
check "ops tensorflow gather" 0 "^array +Gather +as GatherV2" -- "$runnel" ops --tensorflow
check "ops tensorflow missing" 0 "^images +DecodeJpeg +missing" -- "$runnel" ops --tensorflow --missing
check "ops usage" 2 "--missing and --markdown go with --tensorflow" -- "$runnel" ops --missing
# docs/interop.md's table of missing ops is this command's output, kept current.
docs_table=$(sed -n '/^<!-- generated: runnel ops --tensorflow --markdown -->$/,/^<!-- end generated -->$/p' "$(dirname "$0")/../../docs/interop.md" | sed '1d;$d')
if [[ "$docs_table" != "$("$runnel" ops --tensorflow --markdown)" ]]; then
  echo "FAIL docs/interop.md's op table differs from 'runnel ops --tensorflow --markdown' (paste it in)"
  failures=$((failures + 1))
else
  echo "ok   docs op table"
fi

"$(dirname "$runnel")/runnel_demo" --steps 1 --out "$work/demo" >/dev/null
check "graph dump" 0 "logits/probs = Softmax\(" -- "$runnel" graph dump "$work/demo/mlp.graph"
head -c 100 "$work/demo/mlp.graph" > "$work/truncated.graph"
check "graph truncated" 1 "DATA_LOSS: .*truncated.graph" -- "$runnel" graph dump "$work/truncated.graph"
check "graph help" 0 "usage: runnel graph dump" -- "$runnel" graph dump --help
check "graph dot" 0 "digraph runnel" -- "$runnel" graph dot "$work/demo/mlp.graph"
check "graph dot placed" 0 "device:CPU:1" -- "$runnel" graph dot "$work/demo/mlp.graph" --place cost --devices 2
check "graph dot explain" 0 "earliest estimated finish" -- "$runnel" graph dot "$work/demo/mlp.graph" --place cost --explain
check "graph dot bad policy" 2 "--place must be first or cost" -- "$runnel" graph dot "$work/demo/mlp.graph" --place nope

# Record files written by TensorFlow pipelines (../shared/testdata).
# TensorFlow GraphDefs and NumPy arrays (tests/tf/make_tf_graphs.py writes them the way
# TensorFlow does, with the outputs NumPy computes).
tf=$work/tf
/usr/bin/python3 "$(dirname "$0")/../tf/make_tf_graphs.py" "$tf" 250
check "graph import" 0 "^  x float32\[\?,784\]" -- "$runnel" graph import "$tf/mnist_cnn.pb"
check "graph import unsupported" 1 "node 'lrn' \(op LRN\); node 'z' \(op FancyUnknownOp\)" -- "$runnel" graph import "$tf/unsupported.pbtxt"
check "graph import --out" 0 "wrote .*cnn.graph" -- "$runnel" graph import "$tf/mnist_cnn.pbtxt" --out "$tf/cnn.graph"
check "graph export" 0 "wrote .*cnn_back.pbtxt \(29 nodes\)" -- "$runnel" graph export "$tf/cnn.graph" "$tf/cnn_back.pbtxt"
check "run" 0 "softmax -> .*sm.npy \(float32\[250,10\]\)" -- "$runnel" run "$tf/mnist_cnn.pb" --feed "x=$tf/images.npy" --fetch softmax --fetch prediction --out "$tf/sm.npy" --out "$tf/pred.npy"
check "run output" 0 "^same$" -- /usr/bin/python3 -c "
import numpy as np
a, b = np.load('$tf/sm.npy'), np.load('$tf/expected_softmax.npy')
p, q = np.load('$tf/pred.npy'), np.load('$tf/expected_prediction.npy')
print('same' if np.abs(a - b).max() < 1e-4 and (p == q).all() else 'differs')"
check "run fixed batch refused" 1 "expects shape \[100,784\], the file holds \[250,784\].*--batch 100" -- "$runnel" run "$tf/mnist_cnn_b100.pb" --feed "x=$tf/images.npy" --fetch softmax
# 250 rows in steps of 100: the last step has 50, which the fixed-batch graph refuses by name.
check "run batch remainder" 1 "step at row 200" -- "$runnel" run "$tf/mnist_cnn_b100.pb" --feed "x=$tf/images.npy" --fetch softmax --batch 100
check "run batch" 0 "ran 3 steps" -- "$runnel" run "$tf/mnist_cnn.pb" --feed "x=$tf/images.npy" --fetch softmax --out "$tf/sm_b.npy" --batch 100
check "run printed" 0 "prediction = int64\[250\]" -- "$runnel" run "$tf/cnn.graph" --feed "x=$tf/images.npy" --fetch prediction
check "run bad fetch" 1 "--fetch.*nosuch" -- "$runnel" run "$tf/mnist_cnn.pb" --feed "x=$tf/images.npy" --fetch nosuch
check "run bad npy" 1 "DATA_LOSS: .*notes.h5: not a NumPy .npy file" -- "$runnel" run "$tf/mnist_cnn.pb" --feed "x=$work/notes.h5" --fetch softmax
check "run usage" 2 "--feed needs NAME=FILE.npy" -- "$runnel" run "$tf/mnist_cnn.pb" --feed x --fetch softmax
check "help lists every command" 0 "graph dot.*" -- "$runnel" --help

# Keras models (tests/keras/make_keras_models.py writes them as Keras 2 and 3 do, with NumPy's
# outputs): import, then run by layer names.
keras=$work/keras
/usr/bin/python3 "$(dirname "$0")/../keras/make_keras_models.py" "$keras"
check "keras import" 0 "output: dense_1 float32\[\?,3\]" -- "$runnel" keras import "$keras/mlp_k2.h5" --out "$keras/mlp.pb"
# Every subcommand that reads a graph takes the TensorFlow files keras import and export write.
check "graph dump tf" 0 "dense_1/BiasAdd = BiasAdd\(" -- "$runnel" graph dump "$keras/mlp.pb"
# The graph as a session runs it: the dense layers' MatMul + BiasAdd (+ activation) fused.
check "graph dump optimized" 0 "= _FusedMatMul\(" -- env -u RUNNEL_GRAPH_OPTIMIZER "$runnel" graph dump "$keras/mlp.pb" --optimized
check "graph dump optimized log" 0 "graph optimizer: [0-9]+ nodes -> [0-9]+" -- env -u RUNNEL_GRAPH_OPTIMIZER "$runnel" graph dump "$keras/mlp.pb" --optimized
check "graph dump bad fetch" 1 "--fetch.*nope" -- env -u RUNNEL_GRAPH_OPTIMIZER "$runnel" graph dump "$keras/mlp.pb" --optimized --fetch nope
check "graph dump pbtxt" 0 "softmax = Softmax\(" -- "$runnel" graph dump "$tf/mnist_cnn.pbtxt"
check "graph dot tf" 0 "digraph" -- "$runnel" graph dot "$keras/mlp.pb"
check "keras run" 0 "dense_1 -> .*mlp_out.npy \(float32\[5,3\]\)" -- "$runnel" run "$keras/mlp.pb" --feed "dense_input=$keras/mlp_k2_in.npy" --fetch dense_1 --out "$keras/mlp_out.npy"
check "keras run output" 0 "^same$" -- /usr/bin/python3 -c "
import numpy as np
a, b = np.load('$keras/mlp_out.npy'), np.load('$keras/mlp_k2_out.npy')
print('same' if np.abs(a - b).max() < 1e-5 else 'differs')"
check "keras unsupported" 1 "Lambda \(layer 'lambda'\); MultiHeadAttention \(layer 'attention'\)" -- "$runnel" keras import "$keras/unsupported.h5" --out "$keras/u.pb"
check "keras usage" 2 "keras import needs MODEL.h5 and --out" -- "$runnel" keras import "$keras/mlp_k2.h5"

# TensorBoard event files: one TensorFlow wrote (encoded by make_tf_graphs.py), and a training
# app's --logdir.
check "events cat" 0 "113 events, graph: yes, tags: accuracy \(scalar, 10\) loss \(scalar, 100\) weights \(histogram, 1\)" -- "$runnel" events cat "$tf/events.out.tfevents.1700000000.tfhost"
check "events cat json" 0 '^\{"step":20,"wall_time":1700000021,"tag":"accuracy","value":0.2}' -- "$runnel" events cat "$tf" --json --tag accuracy
check "events cat not events" 1 "mnist_cnn.pb:0: .*not a record file" -- "$runnel" events cat "$tf/mnist_cnn.pb"
iris=$(dirname "$runnel")/iris
rm -rf "$work/iris-logs"
check "iris --logdir" 0 "TensorBoard log: .*iris-logs/events.out.tfevents" -- "$iris" --steps 100 --checkpoint-dir "$work/iris-ckpt" --logdir "$work/iris-logs"
check "iris events" 0 '"step":100,.*"tag":"test/accuracy"' -- "$runnel" events cat "$work/iris-logs" --json

if [[ -z $testdata || ! -d $testdata ]]; then
  echo "FAIL records: the shared test data is missing (set RUNNEL_TESTDATA)"
  failures=$((failures + 1))
else
  train=$testdata/tfrecord/spotify_featran/train
  check "records count" 0 "total: 792 records" -- "$runnel" records count "$train"/part-0000{0,1,2,3,4}-of-00005.tfrecords
  check "records count gz" 0 "tfrecords.gz: 3750 records" -- "$runnel" records count "$testdata/tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz"
  check "records verify" 0 "ok \(158 records\)" -- "$runnel" records verify "$train/part-00000-of-00005.tfrecords"
  cp "$train/part-00000-of-00005.tfrecords" "$work/bad.tfrecords"
  printf '\xff' | dd of="$work/bad.tfrecords" bs=1 seek=200 conv=notrunc status=none
  check "records verify corrupt" 1 "bad.tfrecords:[0-9]+: bad (data|length) CRC" -- "$runnel" records verify "$work/bad.tfrecords"
  check "records usage" 2 "needs at least one FILE" -- "$runnel" records count
  cp "$train/part-00001-of-00005.tfrecords" "$work/indexed.tfrecords"
  check "records index" 0 "158 records -> .*indexed.tfrecords.index" -- "$runnel" records index "$work/indexed.tfrecords"
  check "records stats" 0 "f3  float  in 158 records  length 1..1" -- "$runnel" records stats "$train/part-00000-of-00005.tfrecords"
  printf 'name,count,score\ncat,1,0.5\n"dog, big",2,1.5\nbird,3,2\n' > "$work/small.csv"
  check "records convert csv" 0 "wrote .*csv-00001-of-00002" -- "$runnel" records convert --csv "$work/small.csv" "$work/csv" --shards 2
  check "records convert csv content" 0 '"name":\{"type":"bytes","values":\["dog, big"\]\}' -- "$runnel" records cat "$work/csv-00000-of-00002"
  check "records convert csv types" 0 'count  int64.*|score  float' -- "$runnel" records stats "$work/csv-00000-of-00002" "$work/csv-00001-of-00002"
  fm=/usr/share/datasets/fashion-mnist
  check "records convert idx" 0 "wrote .*fm-00003-of-00004.gz" -- "$runnel" records convert --idx "$fm/t10k-images-idx3-ubyte.gz" "$fm/t10k-labels-idx1-ubyte.gz" "$work/fm" --shards 4 --gzip
  check "records convert idx count" 0 "total: 10000 records" -- "$runnel" records count "$work"/fm-0000{0,1,2,3}-of-00004.gz
  check "records convert idx stats" 0 "image_raw  bytes  in 2500 records  length 1..1  sizes 784..784 bytes" -- "$runnel" records stats "$work/fm-00000-of-00004.gz"
  # Long work shows its progress: on a terminal, or in a log with RUNNEL_PROGRESS_EVERY.
  check "records stats progress" 0 "records stats: .* of .* \(100%\)  2500 records  .*/s  [0-9]+ records/s" -- env RUNNEL_PROGRESS_EVERY=0.000001 "$runnel" records stats "$work/fm-00000-of-00004.gz"
  check "records convert progress" 0 "records convert: .*10000 records .*records/s" -- env RUNNEL_PROGRESS_EVERY=0.000001 "$runnel" records convert --idx "$fm/t10k-images-idx3-ubyte.gz" "$fm/t10k-labels-idx1-ubyte.gz" "$work/fm-progress" --shards 2
  check "records count indexed" 0 "indexed.tfrecords: 158 records" -- "$runnel" records count "$work/indexed.tfrecords"
  # A glob over a folder of indexed files names the sidecars too: they are skipped, not bad files.
  mkdir -p "$work/globbed"
  cp "$work/indexed.tfrecords" "$work/indexed.tfrecords.index" "$work/globbed/"
  check "records count glob with sidecars" 0 "skipped 1 index sidecar" -- "$runnel" records count "$work"/globbed/*
  check "records verify glob with sidecars" 0 "globbed/indexed.tfrecords: ok \(158 records\)" -- "$runnel" records verify "$work"/globbed/*
  check "records index glob with sidecars" 0 "158 records -> .*globbed/indexed.tfrecords.index" -- "$runnel" records index "$work"/globbed/*
  [[ ! -e "$work/globbed/indexed.tfrecords.index.index" ]] || { echo "FAIL records index indexed a sidecar"; failures=$((failures + 1)); }
  check "version" 0 "^runnel [0-9]+\.[0-9]+\.[0-9]+" -- "$runnel" --version
  # The README's scripts print their help before installing or building anything (no setup line).
  scripts=$(cd "$(dirname "$0")/../../scripts" && pwd)
  check "demo help" 0 "Sets everything up" -- env RUNNEL_BUILD_DIR="$(dirname "$(dirname "$runnel")")" "$scripts/demo" --help
  if "$scripts/demo" --help 2>&1 | grep -q "^setup:"; then echo "FAIL demo --help ran setup"; failures=$((failures + 1)); fi
  check "test help" 0 "other arguments go to ctest" -- "$scripts/test" --help
  check "records cat" 0 '^\{"f1":\{"type":"float","values":\[' -- "$runnel" records cat "$train/part-00000-of-00005.tfrecords" --limit 1
  check "records cat raw" 0 '^\{"raw_base64":"' -- "$runnel" records cat "$testdata/tfrecord/en_fr.tfrecord" --raw --limit 1
  # --name=value is --name value for every option that takes one; a flag given a value is refused.
  check "option=value" 0 '^\{"raw_base64":"' -- "$runnel" records cat "$testdata/tfrecord/en_fr.tfrecord" --raw --limit=1
  [[ $("$runnel" records cat "$testdata/tfrecord/en_fr.tfrecord" --raw --limit=2 | wc -l) == 2 ]] || { echo "FAIL --limit=2 did not give 2 records"; failures=$((failures + 1)); }
  check "flag=value refused" 2 "'--raw=1': --raw is not an option that takes a value" -- "$runnel" records cat "$testdata/tfrecord/en_fr.tfrecord" --raw=1
  # Payloads that are not Examples are said to be so, not decoded into garbage keys.
  check "records cat elwc" 0 '"payload":"not an Example or SequenceExample"' -- "$runnel" records cat "$testdata/tfrecord/train_elwc.tfrecord" --limit 1
  check "records cat sequence" 0 '"feature_lists":\{"int_feature":\[\{"type":"int64"' -- "$runnel" records cat "$testdata/tfrecord/tft_sequence_example.tfrecord.gz" --limit 1
  check "records cat files" 0 '^3$' -- bash -c "'$runnel' records cat '$train/part-00000-of-00005.tfrecords' '$train/part-00001-of-00005.tfrecords' '$testdata/tfrecord/en_fr.tfrecord' --limit 1 | wc -l"
  check "records cat valid json" 0 '^valid$' -- bash -c "'$runnel' records cat '$testdata/tfrecord/spotify_taxi_part-00000-of-00004.tfrecords.gz' '$testdata/tfrecord/train_elwc.tfrecord' '$testdata/tfrecord/tft_sequence_example.tfrecord.gz' | /usr/bin/python3 -c 'import json, sys; [json.loads(l) for l in sys.stdin]; print(\"valid\")'"
  check "records count json" 0 '^\{"file":".*part-00000-of-00005.tfrecords","ok":true,"records":158\}' -- "$runnel" records count "$train/part-00000-of-00005.tfrecords" --json
  check "records count bad file" 1 'total: 158 records \(1 file unreadable\)' -- "$runnel" records count "$train/part-00000-of-00005.tfrecords" /nonexistent.tfrecords
  check "records verify json" 1 '"ok":false,"error":".*bad.tfrecords:[0-9]+' -- "$runnel" records verify "$work/bad.tfrecords" --json
  check "records stats json" 0 '"features":\{"f1":\{"type":"float","records":158' -- "$runnel" records stats "$train/part-00000-of-00005.tfrecords" --json
  cp "$train/part-00002-of-00005.tfrecords" "$work/stale.tfrecords"
  "$runnel" records index "$work/stale.tfrecords" >/dev/null
  cat "$train/part-00003-of-00005.tfrecords" >>"$work/stale.tfrecords"
  check "records count stale index" 0 'stale.tfrecords: 318 records \(stale index: read the file\)' -- "$runnel" records count "$work/stale.tfrecords"
  printf 'a,b,c\n1,,x\n2,2.5,\n,3.5,z\n' > "$work/gaps.csv"
  check "records convert new dir" 0 "wrote .*newdir/sub/gaps-00000-of-00001" -- "$runnel" records convert --csv "$work/gaps.csv" "$work/newdir/sub/gaps"
  check "records convert csv gaps" 0 'a  int64  in 3 records  length 0\.\.1  values 1\.\.2' -- "$runnel" records stats "$work/newdir/sub/gaps-00000-of-00001"
  check "records convert csv gaps float" 0 'b  float  in 3 records  length 0\.\.1' -- "$runnel" records stats "$work/newdir/sub/gaps-00000-of-00001"
fi

echo "$failures failed"
exit $((failures > 0))
