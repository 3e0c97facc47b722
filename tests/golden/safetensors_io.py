"""Minimal, dependency-free (stdlib + numpy) safetensors writer and reader.

Format (https://github.com/huggingface/safetensors):
  * 8 bytes: little-endian u64 N, the length of the JSON header;
  * N bytes: UTF-8 JSON object
        {"__metadata__": {"key": "value", ...},          (optional, str -> str)
         "tensor name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
         ...}
    padded at the end with spaces so that the data section starts at an
    offset that is a multiple of 8;
  * the data section: raw little-endian, C-order tensor bytes; data_offsets
    are relative to the start of the data section.  The tensors cover the
    data section contiguously (no holes), as the reference implementation
    requires.

The writer is deterministic: the header is emitted with "__metadata__" first,
then tensors ordered by decreasing element size and then by name (the same
policy as the reference implementation), which also keeps every tensor
naturally aligned because the data section starts 8-aligned.  The JSON is
compact (no whitespace other than the trailing padding).
"""

import json
import struct

import numpy as np

# safetensors dtype string <-> little-endian numpy dtype
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
}


def _dtype_name(arr):
    dt = arr.dtype
    for name, ref in _DTYPES.items():
        if dt.kind == ref.kind and dt.itemsize == ref.itemsize:
            return name
    raise TypeError(f"unsupported dtype {arr.dtype} (supported: F32, F64, I32, I64, I16, I8)")


def serialize(tensors, metadata=None):
    """Return the safetensors bytes for `tensors` (dict name -> numpy array)."""
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must map str -> str, got {k!r}: {v!r}")
    items = []
    for name, arr in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"bad tensor name {name!r}")
        arr = np.asarray(arr)
        dname = _dtype_name(arr)
        arr = np.ascontiguousarray(arr, dtype=_DTYPES[dname])
        items.append((dname, name, arr))
    items.sort(key=lambda t: (-_DTYPES[t[0]].itemsize, t[1]))

    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for dname, name, arr in items:
        raw = arr.tobytes(order="C")
        header[name] = {
            "dtype": dname,
            "shape": [int(s) for s in arr.shape],
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("utf-8")
    pad = (-(8 + len(hjson))) % 8
    hjson += b" " * pad
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(chunks)


def save_file(tensors, path, metadata=None):
    data = serialize(tensors, metadata)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def deserialize(data):
    """Parse safetensors bytes; return (tensors: dict name -> ndarray, metadata: dict)."""
    if len(data) < 8:
        raise ValueError("file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("header length exceeds file size")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    for k, v in metadata.items():
        if not isinstance(v, str):
            raise ValueError(f"metadata value for {k!r} is not a string")
    body = data[8 + n:]
    spans = []
    tensors = {}
    for name, info in header.items():
        dname = info["dtype"]
        if dname not in _DTYPES:
            raise ValueError(f"{name}: unsupported dtype {dname}")
        dt = _DTYPES[dname]
        shape = tuple(int(s) for s in info["shape"])
        b, e = (int(x) for x in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if e - b != count * dt.itemsize or b < 0 or e > len(body):
            raise ValueError(f"{name}: data_offsets {b},{e} inconsistent with {dname}{list(shape)}")
        spans.append((b, e, name))
        tensors[name] = np.frombuffer(body, dtype=dt, count=count, offset=b).reshape(shape).copy()
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise ValueError(f"{name}: hole or overlap in data section at {pos}")
        pos = e
    if pos != len(body):
        raise ValueError("data section has trailing bytes not covered by any tensor")
    return tensors, metadata


def load_file(path):
    with open(path, "rb") as f:
        return deserialize(f.read())
