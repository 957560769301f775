#!/usr/bin/env python3
"""llama.cpp's side of bench/peer.sh: one prefill and one greedy decode of the
given token ids, timed, through llama-cpp-python's low-level API (the C calls
of llama.h, as llama-bench makes them).

    python bench/peer_llamacpp.py --model M.gguf --tokens IDS.txt --prompt P
        [--n-gen N] [--threads T] [--batch B] [--flash-attn on|off] [--kv-type f16|q8_0|q4_0]

IDS.txt holds token ids (BOS first) separated by commas or white space, as
`triforce tokenize --ids` writes them; the first P are the prompt. Steps:

  1. load the model (mmap) and make a context of P + N + 16 positions, K and
     V of the --kv-type (f16, or llama.cpp's -ctk/-ctv q8_0 or q4_0, which
     needs flash attention), n_batch = n_ubatch = B, T threads for prefill
     and decode;
  2. warm up: a batch of 32 tokens and one single token, then clear the
     cache (the weights' pages and the compute buffers are touched first, as
     llama-bench's warm-up run does);
  3. prefill: llama_decode over the P ids in batches of B (logits of each
     batch's last token only); timed with a wall clock around those calls;
  4. decode: N times, the argmax of the last logits fed back as one token;
     timed around the whole loop (llama_decode, reading the logits, argmax),
     which is what `triforce bench` times for a decoded token.

Prints one JSON object on stdout: prefill tok/s, decode ms/token, llama.cpp's
own counters (llama_perf_context: t_p_eval_ms, n_p_eval, t_eval_ms, n_eval)
for a cross-check, and the version and build of llama.cpp. llama.cpp's log
goes to stderr. Exit status 1 on a failed call, 2 on bad input.
"""
import argparse
import ctypes
import json
import sys
import time

import numpy as np

import llama_cpp as L


def fail(msg, code=1):
    print(f"peer_llamacpp: {msg}", file=sys.stderr)
    sys.exit(code)


def decode(ctx, ids):
    """llama_decode of ids (a list of ints) as one batch of a single sequence."""
    arr = (L.llama_token * len(ids))(*ids)
    rc = L.llama_decode(ctx, L.llama_batch_get_one(arr, len(ids)))
    if rc != 0:
        fail(f"llama_decode of {len(ids)} tokens returned {rc}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="file of token ids (BOS first)")
    ap.add_argument("--prompt", type=int, required=True, help="prompt tokens: the first P ids")
    ap.add_argument("--n-gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512, help="n_batch and n_ubatch")
    ap.add_argument("--flash-attn", choices=("on", "off"), default="on")
    ap.add_argument("--kv-type", choices=("f16", "q8_0", "q4_0"), default="f16")
    a = ap.parse_args()
    if a.kv_type != "f16" and a.flash_attn == "off":
        fail(f"--kv-type {a.kv_type} needs --flash-attn on (llama.cpp quantizes V only with flash attention)", 2)
    ids = [int(x) for x in open(a.tokens).read().replace(",", " ").split()]
    if a.prompt < 1 or len(ids) < a.prompt:
        fail(f"{a.tokens} holds {len(ids)} ids, fewer than --prompt {a.prompt}", 2)
    prompt = ids[:a.prompt]

    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.n_gpu_layers = 0
    t0 = time.perf_counter()
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        fail(f"cannot load {a.model}")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    if max(ids) >= n_vocab:
        fail(f"{a.tokens}: token id {max(ids)} is past the model's vocabulary of {n_vocab}", 2)
    cp = L.llama_context_default_params()
    cp.n_ctx = a.prompt + a.n_gen + 16
    cp.n_batch = cp.n_ubatch = a.batch
    cp.n_threads = cp.n_threads_batch = a.threads
    cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if a.flash_attn == "on" else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.type_k = cp.type_v = {"f16": L.GGML_TYPE_F16, "q8_0": L.GGML_TYPE_Q8_0, "q4_0": L.GGML_TYPE_Q4_0}[a.kv_type]
    cp.no_perf = False
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        fail("cannot create a context (llama_init_from_model)")
    load_s = time.perf_counter() - t0
    mem = L.llama_get_memory(ctx)

    def last_argmax():
        row = L.llama_get_logits_ith(ctx, -1)
        return int(np.ctypeslib.as_array(row, shape=(n_vocab,)).argmax())

    # 2. warm-up
    decode(ctx, prompt[:min(32, a.prompt)])
    decode(ctx, [last_argmax()])
    L.llama_memory_clear(mem, True)
    L.llama_perf_context_reset(ctx)

    # 3. prefill
    t0 = time.perf_counter()
    for i in range(0, a.prompt, a.batch):
        decode(ctx, prompt[i:i + a.batch])
    prefill_s = time.perf_counter() - t0

    # 4. greedy decode
    tok = last_argmax()
    t0 = time.perf_counter()
    for _ in range(a.n_gen):
        decode(ctx, [tok])
        tok = last_argmax()
    decode_s = time.perf_counter() - t0

    perf = L.llama_perf_context(ctx)
    desc = ctypes.create_string_buffer(256)
    L.llama_model_desc(model, desc, len(desc))
    res = {
        "engine": "llama.cpp",
        "llama_cpp_python": L.__version__,
        "system_info": L.llama_print_system_info().decode(errors="replace").strip(),
        "model": a.model,
        "model_desc": desc.value.decode(errors="replace"),
        "n_params": L.llama_model_n_params(model),
        "model_bytes": L.llama_model_size(model),
        "threads": a.threads,
        "batch": a.batch,
        "flash_attn": a.flash_attn,
        "kv": a.kv_type,
        "prompt": a.prompt,
        "n_gen": a.n_gen,
        "load_s": load_s,
        "prefill_s": prefill_s,
        "prefill_tok_s": a.prompt / prefill_s,
        "decode_ms_per_tok": 1e3 * decode_s / a.n_gen if a.n_gen else None,
        "perf": {"t_p_eval_ms": perf.t_p_eval_ms, "n_p_eval": perf.n_p_eval, "t_eval_ms": perf.t_eval_ms,
                 "n_eval": perf.n_eval},
    }
    L.llama_free(ctx)
    L.llama_model_free(model)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
