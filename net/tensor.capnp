@0xd48f0e98cc4327a8;
# Tensors on the wire and in files. Numbers are stored little-endian in `data`, row-major;
# string tensors use `strings` instead.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("runnel::wire");

enum DType {
  invalid @0;
  f16 @1;
  bf16 @2;
  f32 @3;
  f64 @4;
  i8 @5;
  u8 @6;
  i32 @7;
  i64 @8;
  bool @9;
  string @10;
}

struct Shape {
  unknownRank @0 :Bool;
  dims @1 :List(Int64);   # -1 = unknown
}

struct Tensor {
  dtype @0 :DType;
  shape @1 :Shape;
  data @2 :Data;
  strings @3 :List(Data);
}
