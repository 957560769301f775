#!/usr/bin/env python3
"""Writes tests/data/quant_vectors.gguf: blocks of Q5_0, Q5_1, Q2_K, Q3_K, Q5_K,
IQ4_NL, IQ4_XS and Q4_1 next to the f32 values that the `gguf` package (llama.cpp's Python GGUF
library) dequantizes them to. test_quantize.c checks that the engine reads the
same values.

Per type T (lower-case name t):
  t.rand      random bytes for every block (finite random f16 scales written
              over the scale fields), shape [4, 256]
  t.rand.f32  gguf.quants.dequantize of t.rand
and for the types gguf can quantize (Q5_0, Q5_1, Q4_1; gguf 0.19.0 has no IQ4
quantizer, only the dequantizers):
  t.quant     gguf.quants.quantize of Gaussian values, shape [4, 256]
  t.quant.f32 gguf.quants.dequantize of t.quant

    python3 -m venv /tmp/venv-gguf && /tmp/venv-gguf/bin/pip install gguf numpy
    /tmp/venv-gguf/bin/python tests/data/gen_quant_vectors.py

The types are written in the order of F16_FIELDS from one seeded generator,
so adding a type at the end leaves the earlier tensors as they were.
"""
import os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import quantize, dequantize

ROWS, COLS = 4, 256
rng = np.random.default_rng(20240611)

# Offsets of the f16 fields in each block (bytes), as the format defines them.
F16_FIELDS = {
    Q.Q5_0: [0],        # d, qh[4], qs[16]
    Q.Q5_1: [0, 2],     # d, m, qh[4], qs[16]
    Q.Q2_K: [80, 82],   # scales[16], qs[64], d, dmin
    Q.Q3_K: [108],      # hmask[32], qs[64], scales[12], d
    Q.Q5_K: [0, 2],     # d, dmin, scales[12], qh[32], qs[128]
    Q.IQ4_NL: [0],      # d, qs[16]
    Q.IQ4_XS: [0],      # d, scales_h (u16), scales_l[4], qs[128]
    Q.Q4_1: [0, 2],     # d, m, qs[16]
}


def random_blocks(qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # magnitudes 1e-3 .. 1e2, both signs: finite f16 values
        v = (rng.choice([-1.0, 1.0], n_blocks) * 10.0 ** rng.uniform(-3, 2, n_blocks)).astype(np.float16)
        raw[:, off:off + 2] = v.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(ROWS, -1)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_vectors.gguf")
    w = gguf.GGUFWriter(out, "llama")
    w.add_string("general.description", "quantized blocks and gguf.quants' dequantization of them")
    for qtype in F16_FIELDS:
        name = qtype.name.lower()
        q = random_blocks(qtype)
        w.add_tensor(name + ".rand", q, raw_dtype=qtype)
        w.add_tensor(name + ".rand.f32", dequantize(q, qtype).astype(np.float32))
        if qtype in (Q.Q5_0, Q.Q5_1, Q.Q4_1):
            x = (rng.standard_normal((ROWS, COLS)) * 0.1).astype(np.float32)
            q = quantize(x, qtype)
            w.add_tensor(name + ".quant", q, raw_dtype=qtype)
            w.add_tensor(name + ".quant.f32", dequantize(q, qtype).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
