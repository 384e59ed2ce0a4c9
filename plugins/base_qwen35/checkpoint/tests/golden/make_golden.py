#!/usr/bin/env python3
"""Regenerates the safetensors golden files with the reference implementation.

    python3 -m venv /work/venv-ckpt && /work/venv-ckpt/bin/pip install safetensors numpy
    /work/venv-ckpt/bin/python plugins/base_qwen35/checkpoint/tests/golden/make_golden.py

Writes, next to this script:
  f32.safetensors, f16.safetensors, bf16.safetensors, mixed.safetensors  (written by safetensors)
  *.expected.f32  the float32 value of every element of every float tensor, little-endian,
                  in the order listed in expected.txt, converted by numpy (independent of qgpu)
  expected.txt    one line per tensor: file name dtype shape(comma-separated or "-") expected-file offset
  VERSIONS.txt    the package versions used
The C++ test reads the .safetensors with qgpu's reader and compares against the expected values,
and rewrites the same tensors with qgpu's writer, which must reproduce the files byte for byte.
"""
import os
import platform
import sys

import numpy as np
import safetensors
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
lines = []


def expect(file, name, dtype, arr_f32, shape, out):
    offset = out.tell() if arr_f32 is not None else -1
    if arr_f32 is not None:
        out.write(np.ascontiguousarray(arr_f32, dtype="<f4").tobytes())
    shape_s = ",".join(str(d) for d in shape) if len(shape) else "-"
    lines.append(f"{file} {name} {dtype} {shape_s} {offset}")


def f16_patterns():
    bits = set(range(0, 0x10000, 29)) | set(range(0, 0x400)) | {0x7C00, 0xFC00, 0x7E00, 0x8000, 0x7BFF, 0x3C00, 0xFBFF}
    return np.array(sorted(bits), dtype=np.uint16)


def bf16_patterns():
    bits = set(range(0, 0x10000, 29)) | set(range(0x0001, 0x0080)) | {0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x7F7F, 0x3F80, 0x0080}
    return np.array(sorted(bits), dtype=np.uint16)


def main():
    # f32: special values, a scalar, an empty tensor, a matrix.
    f32 = {
        "specials": np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.float32(1e-45), np.finfo(np.float32).max,
                              np.float32(3.14159265), np.float32(-1e-38)], dtype=np.float32),
        "scalar": np.array(42.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "matrix": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5) / 8,
    }
    save_file(f32, os.path.join(HERE, "f32.safetensors"), metadata={"format": "np"})
    with open(os.path.join(HERE, "f32.expected.f32"), "wb") as out:
        for name in sorted(f32):
            expect("f32.safetensors", name, "F32", f32[name].reshape(-1), f32[name].shape, out)

    # f16: every subnormal and a spread of all other bit patterns, widened by numpy.
    h = f16_patterns().view(np.float16)
    f16 = {"values": h, "grid": h[:60].reshape(3, 4, 5)}
    save_file(f16, os.path.join(HERE, "f16.safetensors"))
    with open(os.path.join(HERE, "f16.expected.f32"), "wb") as out:
        for name in sorted(f16):
            expect("f16.safetensors", name, "F16", f16[name].astype(np.float32).reshape(-1), f16[name].shape, out)

    # bf16: numpy has no bfloat16; the reference writer takes raw bytes with a dtype name.
    # The f32 value of a bf16 pattern p is the f32 with bit pattern p << 16 (that is the format's definition).
    b = bf16_patterns()
    w = np.ascontiguousarray(b[:24].reshape(4, 6))
    specs = {
        "values": TensorSpec(dtype="bfloat16", shape=list(b.shape), data_ptr=b.ctypes.data, data_len=b.nbytes),
        "weight": TensorSpec(dtype="bfloat16", shape=[4, 6], data_ptr=w.ctypes.data, data_len=w.nbytes),
    }
    serialize_file(specs, os.path.join(HERE, "bf16.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(HERE, "bf16.expected.f32"), "wb") as out:
        for name, arr in sorted({"values": b, "weight": w}.items()):
            expect("bf16.safetensors", name, "BF16", (arr.astype(np.uint32) << 16).view(np.float32).reshape(-1),
                   arr.shape, out)

    # mixed: every common dtype, to pin the reference writer's layout order; non-floats are raw.
    hb = np.array([0x3C00, 0xC000], dtype=np.uint16)
    mixed_np = {
        "i64": np.array([-1, 2**40], dtype=np.int64),
        "u64": np.array([2**63], dtype=np.uint64),
        "f64": np.array([0.5], dtype=np.float64),
        "i32": np.array([-7, 7, 0], dtype=np.int32),
        "u8": np.array([1, 2, 255], dtype=np.uint8),
        "flag": np.array([True, False, True], dtype=np.bool_),
        "a_f32": np.array([[1.5, -2.0]], dtype=np.float32),
        "z_f16": np.array([0.25, -8.0], dtype=np.float16),
        "i16": np.array([-300], dtype=np.int16),
        "i8": np.array([-3], dtype=np.int8),
    }
    specs = {k: TensorSpec(dtype=v.dtype.name, shape=list(v.shape), data_ptr=v.ctypes.data, data_len=v.nbytes)
             for k, v in mixed_np.items()}
    specs["m_bf16"] = TensorSpec(dtype="bfloat16", shape=[2], data_ptr=hb.ctypes.data, data_len=hb.nbytes)
    serialize_file(specs, os.path.join(HERE, "mixed.safetensors"), metadata={"producer": "make_golden.py"})
    with open(os.path.join(HERE, "mixed.expected.f32"), "wb") as out:
        for name in sorted(list(mixed_np) + ["m_bf16"]):
            if name == "m_bf16":
                expect("mixed.safetensors", name, "BF16", (hb.astype(np.uint32) << 16).view(np.float32), [2], out)
                continue
            v = mixed_np[name]
            st = {"int64": "I64", "uint64": "U64", "float64": "F64", "int32": "I32", "uint8": "U8", "bool": "BOOL",
                  "float32": "F32", "float16": "F16", "int16": "I16", "int8": "I8"}[v.dtype.name]
            is_float = st in ("F32", "F16")
            expect("mixed.safetensors", name, st, v.astype(np.float32).reshape(-1) if is_float else None, v.shape, out)

    with open(os.path.join(HERE, "expected.txt"), "w") as f:
        f.write("# file tensor dtype shape offset-in-<stem>.expected.f32 (-1: not a float tensor)\n")
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(HERE, "VERSIONS.txt"), "w") as f:
        f.write(f"python {platform.python_version()}\nsafetensors {safetensors.__version__}\nnumpy {np.__version__}\n")


if __name__ == "__main__":
    sys.exit(main())
