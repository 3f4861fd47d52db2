#!/usr/bin/env python3
"""Writes TensorFlow V2 checkpoints for Runnel's reader tests the way TensorFlow 1.x's
tf.train.Saver writes them, with encoders of its own written from the published formats (not
Runnel's code): the protobuf wire format of tensor_bundle.proto's BundleHeaderProto and
BundleEntryProto, LevelDB's table format as TensorFlow's lib/io/table_builder writes it (restart
points every 16 keys, FindShortestSeparator / FindShortSuccessor index keys, an empty metaindex
block, the 48-byte footer), block trailers with masked CRC32C, raw snappy blocks, and
tensor_bundle.cc's data layout (string tensors: varint64 lengths, their masked CRC32C, bytes).

usage: make_tf_checkpoint.py OUTDIR
Writes, in OUTDIR:
  plain/model.ckpt-1234.{index,data-00000-of-00001}   TensorFlow's defaults: uncompressed,
                      256 KiB blocks (one data block)
  plain/checkpoint    the state file, with absolute paths of another machine and timestamps
  blocks/model.ckpt-1234.*   the same tensors in 200-byte blocks, snappy where it saves an eighth
                      (several data blocks, some compressed)
  sharded/model.ckpt-1234.{index,data-00000-of-00002,data-00001-of-00002}   two data shards
  partitioned/model.ckpt-7.*   partitioned variables, as tf.train.Saver saves them: an entry per
                      variable listing its slices (TensorSliceProto), and an entry per slice under
                      saved_tensor_slice_util's key (OrderedCode: 0, the name, the rank, then
                      start and length per dimension, -1 for a whole dimension), in two shards
The tensors (values by formula, repeated in tests/tf/tf_checkpoint_test.cpp):
  dense/kernel float32 [3,4] = i * 0.25 - 1      dense/bias float32 [4] = 0.5, -0.5, 1.5, -1.5
  global_step int64 [] = 1234                      vocab string [3] = "alpha", "", "gamma \u03b4"
  mask bool [5] = 1, 0, 1, 1, 0                    half float16 [2] = 1.5, -2
  layer_00/w .. layer_29/w float32 [2] = i, -i
and in partitioned/:
  emb float32 [5,3] = i * 0.5, slices 0,3:0,3 and 3,2:0,3 (every extent explicit)
  part/w int64 [2,4] = i * 10, slices -:0,1 and -:1,3 (the first dimension whole)
  words string [4] = "a", "bb", "", "dddd", slices 0,1 and 1,3
  plain float32 [2] = 7, 8 (not partitioned)
  overlap/model.ckpt-7.*   the same with emb's slices overlapping (0,3:0,3 and 2,2:0,3)
"""
import os
import struct
import sys

DT_FLOAT, DT_INT64, DT_STRING, DT_BOOL, DT_HALF = 1, 9, 7, 10, 19

# --- CRC32C (Castagnoli), bitwise table ---
_TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _TABLE.append(c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# --- protobuf wire format ---
def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v) if v else b""


def field_bytes(num, b):
    return varint((num << 3) | 2) + varint(len(b)) + b


def shape_proto(dims):
    return b"".join(field_bytes(2, field_varint(1, d)) for d in dims)


def entry_proto(dtype, dims, shard, offset, size, crc):
    return (field_varint(1, dtype) + field_bytes(2, shape_proto(dims)) + field_varint(3, shard) +
            field_varint(4, offset) + field_varint(5, size) +
            varint((6 << 3) | 5) + struct.pack("<I", crc))


def header_proto(shards):
    version = field_varint(1, 1)  # producer 1, min_consumer 0 (omitted)
    return field_varint(1, shards) + field_bytes(3, version)


# --- snappy (raw format): literals and copies with 2-byte offsets ---
def snappy_compress(data):
    out = bytearray(varint(len(data)))
    lit_start, i, last = 0, 0, {}

    def literal(a, b):
        while a < b:
            n = min(b - a, 256)
            out.extend(bytes([(n - 1) << 2]) if n <= 60 else bytes([60 << 2, n - 1]))
            out.extend(data[a:a + n])
            a += n

    while i + 4 <= len(data):
        key = data[i:i + 4]
        j = last.get(key)
        last[key] = i
        if j is not None and i - j < 65536:
            n = 4
            while i + n < len(data) and data[j + n] == data[i + n] and n < 64:
                n += 1
            literal(lit_start, i)
            out.extend(bytes([((n - 1) << 2) | 2]) + struct.pack("<H", i - j))
            i += n
            lit_start = i
        else:
            i += 1
    literal(lit_start, len(data))
    return bytes(out)


# --- LevelDB tables as TensorFlow writes them ---
def separator(start, limit):
    i = 0
    while i < min(len(start), len(limit)) and start[i] == limit[i]:
        i += 1
    if i < min(len(start), len(limit)) and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def successor(key):
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


class Block:
    def __init__(self, interval):
        self.buf, self.restarts, self.last, self.count, self.interval = bytearray(), [0], b"", 0, interval
        self.entries = 0

    def add(self, key, value):
        shared = 0
        if self.count < self.interval:
            while shared < min(len(key), len(self.last)) and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.count = 0
        self.buf += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self.buf += key[shared:] + value
        self.last, self.count, self.entries = key, self.count + 1, self.entries + 1

    def size(self):
        return len(self.buf) + 4 * len(self.restarts) + 4

    def contents(self):
        return bytes(self.buf) + b"".join(struct.pack("<I", r) for r in self.restarts) + \
            struct.pack("<I", len(self.restarts))


def build_table(rows, block_size=262144, snappy=False, stats=None):
    out = bytearray()

    def write(block):
        raw = block.contents()
        kind = 0
        if snappy:
            packed = snappy_compress(raw)
            if len(packed) < len(raw) - len(raw) // 8:
                raw, kind = packed, 1
        handle = varint(len(out)) + varint(len(raw))
        out.extend(raw + bytes([kind]) + struct.pack("<I", mask(crc32c(raw + bytes([kind])))))
        if stats is not None:
            stats.append(kind)
        return handle

    data, index, pending, last = Block(16), Block(1), None, b""
    for key, value in rows:
        if pending is not None:
            index.add(separator(last, key), pending)
            pending = None
        data.add(key, value)
        last = key
        if data.size() >= block_size:
            pending, data = write(data), Block(16)
    if data.entries:
        pending = write(data)
    if pending is not None:
        index.add(successor(last), pending)
    stats_before = None if stats is None else len(stats)
    meta = write(Block(16))
    idx = write(index)
    if stats is not None:
        del stats[stats_before:]  # count data blocks only
    footer = meta + idx
    footer += b"\0" * (40 - len(footer)) + struct.pack("<Q", 0xDB4775248B80FB57)
    return bytes(out) + footer


# --- OrderedCode (TensorFlow's strings/ordered_code), for slice keys ---
def oc_num(v):
    n = (v.bit_length() + 7) // 8
    return bytes([n]) + v.to_bytes(n, "big")


def oc_signed(v):
    # n bytes hold n header ones, a sign bit and 7n - 1 bits of magnitude
    n = next(n for n in range(1, 11) if -(1 << (7 * n - 1)) <= v < (1 << (7 * n - 1)))
    header = ((1 << n) - 1) << (7 * n)
    return (((v % (1 << (8 * n))) ^ header)).to_bytes(n, "big")


def oc_string(s):
    escaped = {0: b"\x00\xff", 255: b"\xff\x00"}
    return b"".join(escaped.get(c, bytes([c])) for c in s) + b"\x00\x01"


def slice_key(name, extents):
    key = oc_num(0) + oc_string(name.encode()) + oc_num(len(extents))
    for start, length in extents:
        key += oc_signed(start) + oc_signed(length)
    return key


def slice_proto(extents):
    out = b""
    for start, length in extents:
        ext = field_varint(1, start) + (field_varint(2, length) if length >= 0 else b"")
        out += field_bytes(1, ext)
    return out


# --- the tensors and their bytes ---
def tensors():
    t = [
        ("dense/kernel", DT_FLOAT, [3, 4], struct.pack("<12f", *[i * 0.25 - 1 for i in range(12)])),
        ("dense/bias", DT_FLOAT, [4], struct.pack("<4f", 0.5, -0.5, 1.5, -1.5)),
        ("global_step", DT_INT64, [], struct.pack("<q", 1234)),
        ("vocab", DT_STRING, [3], [b"alpha", b"", "gamma \u03b4".encode()]),
        ("mask", DT_BOOL, [5], bytes([1, 0, 1, 1, 0])),
        ("half", DT_HALF, [2], struct.pack("<2e", 1.5, -2.0)),
    ]
    t += [("layer_%02d/w" % i, DT_FLOAT, [2], struct.pack("<2f", i, -i)) for i in range(30)]
    return sorted(t, key=lambda x: x[0].encode())


def tensor_bytes(dtype, value):
    if dtype != DT_STRING:
        return value, crc32c(value)
    lengths, crc = b"", 0
    for s in value:
        lengths += varint(len(s))
        crc = crc32c(struct.pack("<I", len(s)), crc)
    checksum = struct.pack("<I", mask(crc))
    crc = crc32c(checksum, crc)
    body = b"".join(value)
    return lengths + checksum + body, crc32c(body, crc)


def write_checkpoint(prefix, shards=1, **table_args):
    datas = [bytearray() for _ in range(shards)]
    rows = [(b"", header_proto(shards))]
    for i, (name, dtype, dims, value) in enumerate(tensors()):
        shard = i % shards
        data, crc = tensor_bytes(dtype, value)
        rows.append((name.encode(), entry_proto(dtype, dims, shard, len(datas[shard]), len(data),
                                                mask(crc))))
        datas[shard] += data
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    for shard, data in enumerate(datas):
        with open("%s.data-%05d-of-%05d" % (prefix, shard, shards), "wb") as f:
            f.write(data)
    with open(prefix + ".index", "wb") as f:
        f.write(build_table(rows, **table_args))


def write_partitioned(prefix, overlap=False):
    """Partitioned variables as tf.train.Saver saves them; extents (start, length), -1 whole.
    With overlap, emb's second slice starts a row early: as many values as the variable has,
    one row twice and another never (a damaged file a reader must refuse)."""
    variables = [
        ("emb", DT_FLOAT, [5, 3], "<%df", [i * 0.5 for i in range(15)],
         [[(0, 3), (0, 3)], [(2, 2) if overlap else (3, 2), (0, 3)]]),
        ("part/w", DT_INT64, [2, 4], "<%dq", [i * 10 for i in range(8)],
         [[(0, -1), (0, 1)], [(0, -1), (1, 3)]]),
        ("words", DT_STRING, [4], None, [b"a", b"bb", b"", b"dddd"], [[(0, 1)], [(1, 3)]]),
    ]
    datas = [bytearray(), bytearray()]
    rows = [(b"", header_proto(2))]
    for name, dtype, dims, fmt, values, slices in variables:
        entry = field_varint(1, dtype) + field_bytes(2, shape_proto(dims))
        for k, extents in enumerate(slices):
            entry += field_bytes(7, slice_proto(extents))
            # the slice's values: a box of the row-major whole
            box = [range(st, st + ln) if ln >= 0 else range(dims[d])
                   for d, (st, ln) in enumerate(extents)]
            idx = [[]]
            for r in box:
                idx = [i + [j] for i in idx for j in r]
            flat = []
            for i in idx:
                off = 0
                for d, j in enumerate(i):
                    off = off * dims[d] + j
                flat.append(values[off])
            value = flat if fmt is None else struct.pack(fmt % len(flat), *flat)
            data, crc = tensor_bytes(dtype, value)
            shard = k % 2
            rows.append((slice_key(name, extents),
                         entry_proto(dtype, [len(r) for r in box], shard, len(datas[shard]),
                                     len(data), mask(crc))))
            datas[shard] += data
        rows.append((name.encode(), entry))
    data, crc = tensor_bytes(DT_FLOAT, struct.pack("<2f", 7, 8))
    rows.append((b"plain", entry_proto(DT_FLOAT, [2], 0, len(datas[0]), len(data), mask(crc))))
    datas[0] += data
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    for shard, data in enumerate(datas):
        with open("%s.data-%05d-of-%05d" % (prefix, shard, 2), "wb") as f:
            f.write(data)
    with open(prefix + ".index", "wb") as f:
        f.write(build_table(sorted(rows)))


def main():
    out = sys.argv[1]
    write_checkpoint(os.path.join(out, "plain", "model.ckpt-1234"))
    with open(os.path.join(out, "plain", "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "/home/someone/train/model.ckpt-1234"\n'
                'all_model_checkpoint_paths: "/home/someone/train/model.ckpt-1000"\n'
                'all_model_checkpoint_paths: "/home/someone/train/model.ckpt-1234"\n'
                'all_model_checkpoint_timestamps: 1700000000.5\n'
                'all_model_checkpoint_timestamps: 1700000600.25\n'
                'last_preserved_timestamp: 1699999000.0\n')
    stats = []
    write_checkpoint(os.path.join(out, "blocks", "model.ckpt-1234"), block_size=200, snappy=True,
                     stats=stats)
    if len(stats) < 3 or 1 not in stats or 0 not in stats:
        sys.exit("make_tf_checkpoint.py: expected several data blocks, some compressed: %s" % stats)
    write_checkpoint(os.path.join(out, "sharded", "model.ckpt-1234"), shards=2)
    write_partitioned(os.path.join(out, "partitioned", "model.ckpt-7"))
    write_partitioned(os.path.join(out, "overlap", "model.ckpt-7"), overlap=True)


if __name__ == "__main__":
    main()
