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
    """The bytes are not a safetensors file we can read; the message says what was found. Both
    engines give the same verdict and the same message on the same bytes
    (port_ts/test/safetensors-hostile.json), but for the JSON parser's own words after
    "is not JSON: "."""


MAX_INDEX = 2 ** 53  # shape dimensions, offsets and element counts are integers in [0, 2**53), as the port's doubles hold them
MAX_DIMS = 64  # NumPy's limit
MAX_NESTING = 64  # brackets in the header
_MISSING = object()


def _kind(v):
    """How a JSON value is named in a message (twin: kindOf)."""
    if v is _MISSING:
        return "nothing"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}[type(v)]


def _nests_too_deep(text):
    """Whether the brackets outside strings nest deeper than MAX_NESTING (twin: nestsTooDeep): a
    real header nests 3 levels; a fixed limit keeps both engines' verdicts the same where Python's
    parser would run out of stack and V8's would not."""
    depth, in_string, skip = 0, False, False
    for c in text:
        if skip:
            skip = False
        elif in_string:
            if c == "\\":
                skip = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
            if depth > MAX_NESTING:
                return True
        elif c in "}]":
            depth -= 1
    return False


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


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
        text = bytes(view[8:8 + n]).decode("utf-8")  # strict: no overlong forms, surrogates or code points past U+10FFFF
    except UnicodeDecodeError as exc:
        raise SafetensorsError(f"safetensors: the {n}-byte header is not UTF-8 (byte {exc.start} of the header)") from None
    if _nests_too_deep(text):
        raise SafetensorsError(f"safetensors: the {n}-byte header nests deeper than {MAX_NESTING} levels")
    try:
        # JSON numbers read as the port's JSON.parse reads them: doubles (NaN and Infinity are not JSON)
        header = json.loads(text, parse_int=float, parse_constant=_no_constant)
    except ValueError as exc:  # no RecursionError: the nesting is bounded above
        raise SafetensorsError(f"safetensors: the {n}-byte header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"safetensors: the header must be a JSON object, got {_kind(header)}")
    data = view[8 + n:]
    metadata = header.pop("__metadata__", {})
    for name, entry in header.items():
        header[name] = _check_entry(name, entry, len(data))
    return {"header": header, "metadata": metadata, "data": data}


def _check_entry(name, entry, data_len):
    """The entry with its shape and offsets as ints, or SafetensorsError naming the first fault."""
    at = f"safetensors: tensor '{name}'"
    if not isinstance(entry, dict):
        raise SafetensorsError(f"{at} must be an object {{dtype, shape, data_offsets}}, got {_kind(entry)}")
    dtype, shape, offsets = (entry.get(key, _MISSING) for key in ("dtype", "shape", "data_offsets"))
    if not isinstance(dtype, str):
        raise SafetensorsError(f"{at}: dtype must be a string, got {_kind(dtype)}")
    if not isinstance(shape, list):
        raise SafetensorsError(f"{at}: shape must be an array, got {_kind(shape)}")
    if len(shape) > MAX_DIMS:
        raise SafetensorsError(f"{at}: shape has {len(shape)} dimensions, more than {MAX_DIMS}")
    if not isinstance(offsets, list) or len(offsets) != 2:
        got = f"an array of {len(offsets)}" if isinstance(offsets, list) else _kind(offsets)
        raise SafetensorsError(f"{at}: data_offsets must be [begin, end], got {got}")
    numbers = [(f"shape[{i}]", s) for i, s in enumerate(shape)] + [("data_offsets[0]", offsets[0]), ("data_offsets[1]", offsets[1])]
    for where, v in numbers:
        if not isinstance(v, float) or not 0 <= v < MAX_INDEX or not v.is_integer():  # ints were read as floats
            got = (_kind(v) if not isinstance(v, float) else "a negative number" if v < 0
                   else "2**53 or more" if v >= MAX_INDEX else "a fraction")
            raise SafetensorsError(f"{at}: {where} must be an integer in [0, 2**53), got {got}")
    shape, (begin, end) = [int(s) for s in shape], (int(offsets[0]), int(offsets[1]))
    elements = 1  # the product of the non-zero dimensions, held at 2**53 as the port's doubles hold it
    for s in shape:
        elements = min(elements * s, MAX_INDEX) if s else elements
    if elements == MAX_INDEX:
        raise SafetensorsError(f"{at}: shape [{', '.join(map(str, shape))}] has 2**53 or more elements (zero dimensions aside)")
    if not begin <= end <= data_len:
        raise SafetensorsError(f"{at} spans bytes [{begin}, {end}) of a {data_len}-byte data section")
    if dtype in DTYPES:
        needed = 0 if 0 in shape else elements * DTYPES[dtype][0]
        if end - begin != needed:
            raise SafetensorsError(f"{at} ({dtype} [{', '.join(map(str, shape))}]) needs {needed} bytes, its offsets give {end - begin}")
    return {**entry, "shape": shape, "data_offsets": [begin, end]}


def tensor_names(st):
    """The tensor names of a parsed file, in header order."""
    return list(st["header"])


def load_tensor(st, name):
    """Decode one tensor: float64 for the floating dtypes, int64 for the integer ones."""
    entry = st["header"].get(name)
    if entry is None:
        raise SafetensorsError(f"safetensors: no tensor '{name}'; the file has {len(st['header'])} tensors, "
                               f"e.g. {', '.join(tensor_names(st)[:3])}")
    dtype = entry["dtype"]
    if dtype not in DTYPES:
        raise SafetensorsError(f"safetensors: tensor '{name}' has dtype {dtype}; this reader knows {', '.join(sorted(DTYPES))}")
    begin, end = entry["data_offsets"]
    raw = np.frombuffer(st["data"][begin:end], dtype=DTYPES[dtype][1])
    if dtype == "BF16":
        out = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    elif dtype in FLOAT_DTYPES:
        out = raw.astype(np.float64)
    else:
        out = raw.astype(np.int64)
        if dtype == "I64" and out.size and (out.min() < INT32_RANGE[0] or out.max() > INT32_RANGE[1]):
            raise SafetensorsError(f"safetensors: tensor '{name}' (I64) holds values outside the 32-bit range "
                                   "the port's integer tensors can hold")
    return out.reshape(entry["shape"])
