@0xd8482ffc6cf620d4;
# The cluster's protocols: the control plane (Cap'n Proto RPC: Node, Worker, Master) and the
# header of the data plane's tensor frames. See net/endpoint.hpp for the connection preamble and
# the framing.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("runnel::wire");
using import "tensor.capnp".DType;
using import "tensor.capnp".Shape;
using import "tensor.capnp".Tensor;

struct NamedTensor {
  name @0 :Text;
  tensor @1 :Tensor;
}

struct DeviceInfo {
  name @0 :Text;          # full name, e.g. /job:ps/replica:0/task:0/device:CPU:0
  type @1 :Text;          # CPU or GPU
  memoryBytes @2 :Int64;  # 0: unknown
  flopsPerS @3 :Float64;
  bytesPerS @4 :Float64;
}

struct WorkerStatus {
  job @0 :Text;
  task @1 :Int32;
  incarnation @2 :UInt64;   # random per process start: a restarted task has a new one
  devices @3 :List(DeviceInfo);
  cluster @4 :Text;         # the cluster spec the node was started with
}

# Errors travel as a code (error_code's value) and a message; code 0 means success.
struct Status {
  code @0 :Int32;
  message @1 :Text;
}

# A traced call's record (run_options::trace): the nodes it ran, with times on the steady clock
# of the process that ran them (ns since that clock's epoch), and when that process got the call
# and answered it on the same clock, so the caller can align them to its own (docs/cluster.md).
struct NodeTrace {
  node @0 :Text;
  op @1 :Text;
  device @2 :Text;
  startNs @3 :Int64;
  endNs @4 :Int64;
  outputBytes @5 :Int64;
}

struct CallTrace {
  nodes @0 :List(NodeTrace);
  receivedNs @1 :Int64;
  repliedNs @2 :Int64;
}

interface Worker {
  getStatus @0 () -> (status :WorkerStatus);
  # A partition: a GraphDef (net/graph.capnp, file bytes) whose nodes all name devices of this
  # task. The handle names it in later calls.
  registerGraph @1 (graph :Data) -> (error :Status, handle :Text);
  # Runs every node of a registered partition for one step, with the master's step id.
  # With `trace`, the reply's trace holds the partition's node times.
  runGraph @2 (handle :Text, stepId :Int64, feeds :List(NamedTensor), fetches :List(Text),
               trace :Bool)
      -> (error :Status, tensors :List(NamedTensor), trace :CallTrace);
  # Cancels what a step still waits for here (Recvs) and drops what it left.
  cleanupStep @3 (stepId :Int64) -> ();
  deregisterGraph @4 (handle :Text) -> ();
}

interface Master {
  createSession @0 (graph :Data, costModel :Bool) -> (error :Status, handle :Text);
  # Replaces the session's graph with a larger one (nodes appended, earlier ones unchanged).
  extendSession @1 (handle :Text, graph :Data) -> (error :Status);
  # With `trace`, the reply's trace holds every task's node times on the master's clock.
  run @2 (handle :Text, feeds :List(NamedTensor), fetches :List(Text), targets :List(Text),
          trace :Bool)
      -> (error :Status, tensors :List(Tensor), trace :CallTrace);
  closeSession @3 (handle :Text) -> ();
  # Fails the session's steps in flight with CANCELLED (a client's Ctrl-C); their tasks clean
  # them up. Steps started after it run as usual.
  cancelSteps @4 (handle :Text) -> ();
}

# What a connection's bootstrap capability is.
interface Node {
  worker @0 () -> (worker :Worker);
  master @1 () -> (master :Master);
}

# Data plane: each frame is a little-endian uint32 header length, this header as a flat Cap'n
# Proto message, then `payloadBytes` raw bytes: the tensor's buffer (little-endian, row-major;
# as bfloat16 when wireBf16). String tensors travel whole in `stringTensor`, with no payload.
struct TensorFrame {
  stepId @0 :Int64;
  key @1 :Text;
  dtype @2 :DType;
  shape @3 :Shape;
  payloadBytes @4 :UInt64;
  wireBf16 @5 :Bool;
  stringTensor @6 :Tensor;
  senderIncarnation @7 :UInt64;
  # On a connection whose sender offered a shared-memory ring the receiver mapped (docs/cluster.md,
  # "Shared memory on one host"): the payload sits in the ring at running position shmPos instead
  # of following the header.
  shmPos @8 :UInt64;
  inShm @9 :Bool;
}

# Step calls (docs/cluster.md, "Step calls": a worker's runGraph, cleanupStep and heartbeat, and a
# master's run): on a connection of their own kind, each message is
# a little-endian uint32 header length, this header as a flat Cap'n Proto message, then the raw
# payloads of its tensors in the order listed (each as a TensorFrame describes it: `key` is the
# tensor's name; string tensors travel whole in the header). Calls are written by the calling
# thread and answered, by call id, on the thread that reads the socket.
struct RunGraphCall {
  handle @0 :Text;
  stepId @1 :Int64;
  feeds @2 :List(TensorFrame);
  fetches @3 :List(Text);
  trace @4 :Bool;
}

struct RunGraphReply {
  error @0 :Status;
  tensors @1 :List(TensorFrame);
  trace @2 :CallTrace;
}

# A remote session's step, to a node's master (Master.run's parameters).
struct MasterRunCall {
  handle @0 :Text;
  feeds @1 :List(TensorFrame);
  fetches @2 :List(Text);
  targets @3 :List(Text);
  trace @4 :Bool;
}

struct StepMessage {
  callId @0 :UInt64;
  union {
    runGraph @1 :RunGraphCall;
    runGraphReply @2 :RunGraphReply;
    cleanupStep @3 :Int64;       # no reply
    heartbeat @4 :Void;
    heartbeatReply @5 :Void;
    # The server could not take the call (over its calls in flight): no other reply comes.
    refused @6 :Status;
    run @7 :MasterRunCall;
    runReply @8 :RunGraphReply;  # the fetched tensors unnamed, in the order asked
  }
}
