@0x8ea35edf9fa1f19a;
# GraphDef: a graph as TensorFlow describes one. Inputs are "node" / "node:index" for data and
# "^node" for control inputs, in argument order.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("runnel::wire");
using import "tensor.capnp".DType;
using import "tensor.capnp".Shape;
using import "tensor.capnp".Tensor;

struct GraphDef {
  nodes @0 :List(NodeDef);
  collections @1 :List(Collection);
  seed @2 :Int64;
  hasSeed @3 :Bool;
}

struct NodeDef {
  name @0 :Text;
  op @1 :Text;
  inputs @2 :List(Text);
  device @3 :Text;
  attrs @4 :List(Attr);
}

struct Attr {
  name @0 :Text;
  value :union {
    i @1 :Int64;
    f @2 :Float64;
    b @3 :Bool;
    s @4 :Data;
    type @5 :DType;
    shape @6 :Shape;
    tensor @7 :Tensor;
    listI @8 :List(Int64);
    listF @9 :List(Float64);
    listType @10 :List(DType);
    listS @11 :List(Data);
    listShape @12 :List(Shape);
  }
}

struct Collection {
  name @0 :Text;
  nodes @1 :List(Text);
}
