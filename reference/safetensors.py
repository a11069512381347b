"""Reading the safetensors format ourselves (twin: safetensors.ts). docs/pretrained.md.

A file (or a buffer, as a browser would hand it) is:
  bytes 0..7        N, the header's length, an unsigned 64-bit little-endian integer
  bytes 8..8+N      the header: UTF-8 JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}},
                    plus an optional "__metadata__" {str: str}; may end in spaces
  bytes 8+N..       the data: tensor `name` is bytes [begin, end) of it, row-major, little-endian
Floating dtypes become float64 exactly (every F16, BF16 and F32 value is a double): F64, F32,
F16 (IEEE half: subnormals, infinities, NaN), BF16 (the top 16 bits of a float32). Integer
dtypes I64, I32, I16, I8, U8 and BOOL become int64 (the port: Int32Array, so I64 values must fit
32 bits). Only the tensors asked for are decoded; the header is checked whole, up front.
"""

import json

import numpy as np

# dtype -> (bytes per element, NumPy little-endian type the bytes are read as)
DTYPES = {
    "F64": (8, "<f8"), "F32": (4, "<f4"), "F16": (2, "<f2"), "BF16": (2, "<u2"),
    "I64": (8, "<i8"), "I32": (4, "<i4"), "I16": (2, "<i2"), "I8": (1, "i1"), "U8": (1, "u1"), "BOOL": (1, "u1"),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
INT32_RANGE = (-(2 ** 31), 2 ** 31 - 1)  # what the port's Int32Array holds


class SafetensorsError(ValueError):
    """The bytes are not a safetensors file we can read; the message says what was found."""


def parse_safetensors(buf):
    """Check the header of a safetensors buffer (bytes-like) -> {"header": {name: entry},
    "metadata": {...}, "data": memoryview of the data section}. Nothing is decoded yet."""
    view = memoryview(buf).cast("B")
    if len(view) < 8:
        raise SafetensorsError(f"safetensors: {len(view)} bytes is too short for the 8-byte header length")
    n = int.from_bytes(view[:8], "little")
    if n > len(view) - 8:
        raise SafetensorsError(f"safetensors: header length {n} runs past the end of the {len(view)}-byte buffer")
    try:
        header = json.loads(bytes(view[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SafetensorsError(f"safetensors: the {n}-byte header is not UTF-8 JSON: {exc}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"safetensors: the header must be a JSON object, got {type(header).__name__}")
    data = view[8 + n:]
    metadata = header.pop("__metadata__", {})
    for name, entry in header.items():
        _check_entry(name, entry, len(data))
    return {"header": header, "metadata": metadata, "data": data}


def _check_entry(name, entry, data_len):
    if not (isinstance(entry, dict) and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
            and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2):
        raise SafetensorsError(f"safetensors: tensor {name!r} needs dtype, shape and data_offsets [begin, end], got {entry!r}")
    shape, (begin, end) = entry["shape"], entry["data_offsets"]
    if not all(isinstance(s, int) and s >= 0 for s in shape + [begin, end]):
        raise SafetensorsError(f"safetensors: tensor {name!r} has a shape or offsets that are not non-negative integers: {entry!r}")
    if not begin <= end <= data_len:
        raise SafetensorsError(f"safetensors: tensor {name!r} spans bytes [{begin}, {end}) of a {data_len}-byte data section")
    if entry["dtype"] in DTYPES:
        size = DTYPES[entry["dtype"]][0]
        count = 1
        for s in shape:
            count *= s
        if end - begin != count * size:
            raise SafetensorsError(f"safetensors: tensor {name!r} ({entry['dtype']} {shape}) needs {count * size} bytes, "
                                   f"its offsets give {end - begin}")


def tensor_names(st):
    """The tensor names of a parsed file, in header order."""
    return list(st["header"])


def load_tensor(st, name):
    """Decode one tensor: float64 for the floating dtypes, int64 for the integer ones."""
    entry = st["header"].get(name)
    if entry is None:
        raise SafetensorsError(f"safetensors: no tensor {name!r}; the file has {len(st['header'])} tensors, "
                               f"e.g. {tensor_names(st)[:3]}")
    dtype = entry["dtype"]
    if dtype not in DTYPES:
        raise SafetensorsError(f"safetensors: tensor {name!r} has dtype {dtype}; this reader knows {sorted(DTYPES)}")
    begin, end = entry["data_offsets"]
    raw = np.frombuffer(st["data"][begin:end], dtype=DTYPES[dtype][1])
    if dtype == "BF16":
        out = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    elif dtype in FLOAT_DTYPES:
        out = raw.astype(np.float64)
    else:
        out = raw.astype(np.int64)
        if dtype == "I64" and out.size and (out.min() < INT32_RANGE[0] or out.max() > INT32_RANGE[1]):
            raise SafetensorsError(f"safetensors: tensor {name!r} (I64) holds values outside the 32-bit range "
                                   "the port's integer tensors can hold")
    return out.reshape(entry["shape"])
