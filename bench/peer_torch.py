#!/usr/bin/env python3
"""PyTorch peer for the CUDA backend: batch-1 greedy decode of a random-weight Hugging Face
LlamaForCausalLM at given context depths, as a strong PyTorch user would run it.

    python3 bench/peer_torch.py --preset llama2-7b-128k --depths 32768,65536,122880 --n 64 \
        --rows 1,2,4,8 --reps 3 --out results.jsonl [--device cuda|cpu] [--dtype float16|float32]
        [--prefill] [--check] [--no-graph]

Per preset (a comma list is allowed) the model is built on the device in the dtype, SDPA
attention, weights ~ N(0, 0.02) (norms 1). Per depth: a StaticCache of depth + n + max(rows) + 8
positions (allocated per depth, so attention scans no unused cache), its K/V filled with random
N(0, 1) values up to the depth (--prefill: a real chunked prefill of random ids instead), then
  decode: n greedy tokens from position `depth`, argmax fed back on the device, the one-token
          step captured in a CUDA graph (eager if capture fails, or on CPU); median and min over
          --reps of (time of n steps) / n, after a warm-up run;
  rows k: one forward of k rows at depth (a speculative verify pass), graph-captured likewise.
Floor: bytes read (every weight once, an untied embedding table gathered not read, plus the KV
cache at depth + n/2, or depth + k for a pass) / the bandwidth of a device copy_ measured here,
counted as (bytes read + bytes written) / time, best of 10. --check compares the timed path's
tokens with a plain eager model(...) loop (where they part at a near-tie of the eager logits,
NEAR_TIE, it says so and does not fail). Failures are printed and the run goes on; exit 1 if any.
"""
import argparse, gc, inspect, json, platform, statistics, sys, time, traceback

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "intermediate_size", "vocab_size", "rms_norm_eps", "max_position_embeddings",
        "tie_word_embeddings")
PRESETS = {  # KEYS..., rope theta, rope scaling (None: plain RoPE)
    "llama2-7b-128k": (4096, 32, 32, 32, 11008, 32000, 1e-5, 131072, False, 10000.0,
                       {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}),
    "llama-68m": (768, 2, 12, 12, 3072, 32000, 1e-6, 2048, False, 10000.0, None),
    "smollm2-135m": (576, 30, 9, 3, 1536, 49152, 1e-5, 8192, True, 100000.0, None),
}
TF_MAJOR = int(transformers.__version__.split(".")[0])
# --check: where the timed loop's tokens part from the eager loop's, the eager logits of the
# timed loop's token at most this far (relative to the largest |logit|) below the eager argmax
# count as a near-tie of two float16 computations, not a failure
NEAR_TIE = 1e-2


def log(msg):
    print(msg, flush=True)


def make_config(name, max_ctx):
    p = dict(zip(KEYS, PRESETS[name]))
    theta, rope = PRESETS[name][-2:]
    if name == "llama-68m":  # allow depths past its 2048 positions
        p["max_position_embeddings"] = max(2048, max_ctx + 64)
    if hasattr(LlamaConfig(), "rope_parameters"):  # transformers 5.x
        p["rope_parameters"] = dict(rope or {"rope_type": "default"}, rope_theta=theta)
    else:  # 4.4x
        p["rope_theta"] = theta
        if rope:
            p["rope_scaling"] = dict(rope)
    cfg = LlamaConfig(hidden_act="silu", attention_bias=False, mlp_bias=False, use_cache=True,
                      pad_token_id=None, bos_token_id=1, eos_token_id=2, **p)
    if p["max_position_embeddings"] < max_ctx:
        log(f"  note: depths exceed {name}'s max_position_embeddings {p['max_position_embeddings']}")
    return cfg


def build_model(cfg, dev, dtype):
    """Built directly on the device in the dtype (no CPU init), SDPA, weights ~ N(0, 0.02)."""
    kw = "dtype" if TF_MAJOR >= 5 else "torch_dtype"
    with torch.device(dev):
        model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa", **{kw: dtype})
    if next(model.parameters()).dtype != dtype or next(model.parameters()).device.type != dev.type:
        model = model.to(device=dev, dtype=dtype)
    gen = torch.Generator(device=dev).manual_seed(0)
    for name, prm in model.named_parameters():  # explicit: never rely on the version's init
        if prm.dim() >= 2:
            prm.normal_(0.0, 0.02, generator=gen)
        else:
            prm.fill_(1.0)  # RMSNorm weights
    model.eval()
    attn = getattr(model.config, "_attn_implementation", "?")
    if attn != "sdpa":
        raise RuntimeError(f"attention implementation is {attn!r}, not sdpa")
    return model, kw


def weight_bytes(model, cfg):
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # tied counted once
    emb = model.get_input_embeddings().weight
    read = total - (0 if cfg.tie_word_embeddings else emb.numel() * emb.element_size())
    return total, read


def make_cache(cfg, L, dev, dtype):
    """A StaticCache of L positions, allocated now, on dev in dtype. Returns (cache, variant)."""
    from transformers import StaticCache
    more = dict(max_cache_len=L, device=dev, dtype=dtype)  # 4.4x also needs the batch size
    variants = [dict(max_cache_len=L), dict(max_batch_size=1, **more), dict(batch_size=1, **more)]
    if TF_MAJOR < 5:
        variants = variants[1:] + variants[:1]
    kvh, hd = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    errors = []
    for kw in variants:
        label = "StaticCache(config=, " + ", ".join(f"{k}=" for k in kw) + ")"
        try:
            cache = StaticCache(config=cfg, **kw)
            if hasattr(cache, "layers") and not all(getattr(l, "is_initialized", True) for l in cache.layers):
                if hasattr(cache, "early_initialization"):  # 5.x allocates lazily otherwise
                    cache.early_initialization(1, kvh, hd, dtype, dev)
                else:
                    for l in cache.layers:
                        l.lazy_initialization(torch.empty(1, kvh, 1, hd, dtype=dtype, device=dev),
                                              torch.empty(1, kvh, 1, hd, dtype=dtype, device=dev))
            k = kv_list(cache)[0][0]
            if k.dtype != dtype or k.device.type != dev.type or k.shape[2] != L:
                raise RuntimeError(f"got {tuple(k.shape)} {k.dtype} on {k.device}")
            return cache, label
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as e:  # try the next signature
            errors.append(f"{label}: {type(e).__name__}: {e}")
            gc.collect()
    raise RuntimeError("no StaticCache variant worked: " + " | ".join(errors))


def kv_list(cache):
    if hasattr(cache, "layers"):  # 5.x: one StaticLayer per layer
        return [(l.keys, l.values) for l in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))  # 4.4x


def set_cache_pos(cache, pos):
    """5.x StaticLayer writes at its own device counter `cumulative_length`; 4.4x uses cache_position."""
    for l in getattr(cache, "layers", []):
        if hasattr(l, "cumulative_length"):
            l.cumulative_length.fill_(pos)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def free(dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def timed_ms(fn, dev):
    if dev.type == "cuda":
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); e0.record(); fn(); e1.record(); e1.synchronize()
        return e0.elapsed_time(e1)
    t = time.perf_counter(); fn()
    return (time.perf_counter() - t) * 1e3


def copy_bw(dev, mib):
    """(bytes read + bytes written) / time of a device-to-device copy_, best of 10, in GB/s."""
    nb = mib << 20
    a = torch.ones(nb, dtype=torch.uint8, device=dev); b = torch.empty_like(a)
    b.copy_(a); sync(dev)
    best = min(timed_ms(lambda: b.copy_(a), dev) for _ in range(10))
    del a, b
    free(dev)
    return 2 * nb / best / 1e6


def maybe_graph(fn, reset, dev, use_graph, what):
    """fn captured in a CUDA graph (returns replay, 'cuda-graph'), else (fn, 'eager ...')."""
    if dev.type != "cuda" or not use_graph:
        return fn, "eager" + (" (cpu)" if dev.type != "cuda" else " (--no-graph)")
    try:
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up on a side stream before capture
            for _ in range(3):
                reset(); fn()
        torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
        reset(); g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        return g.replay, "cuda-graph"
    except Exception as e:
        log(f"  NOTE: CUDA graph capture of the {what} failed ({type(e).__name__}: {str(e)[:200]}); "
            "timing EAGER instead")
        return fn, f"eager (graph capture failed: {type(e).__name__})"


def stats(xs):
    return {"ms_median": statistics.median(xs), "ms_min": min(xs), "ms_all": xs}


def run_depth(a, model, cfg, dev, dtype, depth, common, emit):
    """All measurements of one depth; returns (row for the table, failures)."""
    fails, maxrows = 0, max(a.rows)
    L = depth + a.n + maxrows + 8
    cache, variant = make_cache(cfg, L, dev, dtype)
    sig = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in sig else "past_key_values"
    use_cpos = "cache_position" in sig
    api = {"static_cache": variant, "cache_kwarg": cache_kw, "cache_position_arg": use_cpos,
           "cache_len": L}
    gen = torch.Generator(device=dev).manual_seed(1234 + depth)
    t0 = time.perf_counter()
    if a.prefill:  # real chunked prefill of random token ids
        ids = torch.randint(3, cfg.vocab_size, (1, depth), device=dev, generator=gen)
        set_cache_pos(cache, 0)
        for s in range(0, depth, a.chunk):
            e = min(depth, s + a.chunk)
            kw = {"input_ids": ids[:, s:e], "position_ids": torch.arange(s, e, device=dev)[None],
                  cache_kw: cache, "use_cache": True, "logits_to_keep": 1}
            if use_cpos:
                kw["cache_position"] = torch.arange(s, e, device=dev)
            model(**kw)
        fill = f"real prefill of {depth} random token ids in chunks of {a.chunk}"
    else:
        for k, v in kv_list(cache):
            k[:, :, :depth].normal_(0.0, 1.0, generator=gen)
            v[:, :, :depth].normal_(0.0, 1.0, generator=gen)
        fill = "K/V cache filled with RANDOM normal values (std 1), no prefill"
    sync(dev)
    fill_s = time.perf_counter() - t0
    log(f"  depth {depth}: {fill} ({fill_s:.2f} s); cache {L} positions via {variant}")
    base = dict(common, depth=depth, kv_fill=fill, kv_fill_s=fill_s, **api)

    def fwd(ids, pos, cpos):
        kw = {"input_ids": ids, "position_ids": pos, cache_kw: cache, "use_cache": True}
        if use_cpos:
            kw["cache_position"] = cpos
        return model(**kw).logits

    # decode: static inputs; the step feeds its argmax back on the device
    first = 1
    tok = torch.full((1, 1), first, dtype=torch.long, device=dev)
    pos = torch.full((1, 1), depth, dtype=torch.long, device=dev)
    cpos = torch.full((1,), depth, dtype=torch.long, device=dev)
    idx = torch.zeros(1, dtype=torch.long, device=dev)
    toks = torch.zeros(a.n + 8, dtype=torch.long, device=dev)

    def step():
        nxt = fwd(tok, pos, cpos)[:, -1].argmax(-1)
        toks.index_copy_(0, idx, nxt)
        tok.copy_(nxt.view(1, 1)); pos.add_(1); cpos.add_(1); idx.add_(1)

    def reset():
        tok.fill_(first); pos.fill_(depth); cpos.fill_(depth); idx.zero_(); set_cache_pos(cache, depth)

    run, mode = maybe_graph(step, reset, dev, not a.no_graph, "decode step")

    def decode_n():
        for _ in range(a.n):
            run()

    reset(); decode_n(); sync(dev)  # warm-up
    times = []
    for _ in range(a.reps):
        reset(); sync(dev)
        times.append(timed_ms(decode_n, dev) / a.n)
    got = toks[:a.n].tolist()
    kv_tok = common["kv_bytes_per_pos"]
    dbytes = common["weight_bytes_read"] + kv_tok * (depth + a.n / 2)
    floor = dbytes / (common["bw_copy_gbs"] * 1e6)
    st = stats(times)
    rec = dict(base, kind="decode", mode=mode, bytes_per_token=dbytes, floor_ms=floor,
               pct_of_floor=100 * floor / st["ms_median"], tokens=got[:32], **st)
    if a.check:  # plain eager model(...) loop on the same cache state, positions from the host
        set_cache_pos(cache, depth)
        ref, gap = [first], None
        for i, p in enumerate(range(depth, depth + a.n)):
            T = lambda *x: torch.tensor(x, device=dev)
            row = fwd(T([ref[-1]]), T([p]), T(p))[0, -1].float()
            ref.append(int(row.argmax()))
            if gap is None and ref[-1] != got[i]:  # where the loops part (the same tokens before it)
                gap = float((row[ref[-1]] - row[got[i]]) / row.abs().max().clamp_min(1e-30))
        ref, ok = ref[1:], ref[1:] == got
        bad = next((i for i, (x, y) in enumerate(zip(got, ref)) if x != y), None)
        near = not ok and gap is not None and gap <= NEAR_TIE
        verdict = "PASS" if ok else "NEAR-TIE" if near else "FAIL"
        log(f"  check depth {depth}: {verdict}: {mode} greedy tokens "
            f"{'==' if ok else '!='} a plain eager model(...) loop" +
            ("" if ok else f" (first mismatch at token {bad}: {got[bad]} vs {ref[bad]}, "
                           f"{gap:.2g} of the largest |logit| apart in the eager loop's logits; "
                           f"a near-tie up to {NEAR_TIE:g})"))
        rec.update(check=verdict, check_gap=gap, check_ref_tokens=ref[:32])
        fails += 0 if ok or near else 1
    emit(rec)
    log(f"  decode depth {depth}: {st['ms_median']:.3f} ms/token (min {st['ms_min']:.3f}), "
        f"floor {floor:.3f} ms ({rec['pct_of_floor']:.0f}% of floor), {mode}")
    row = dict(depth=depth, med=st["ms_median"], mn=st["ms_min"], floor=floor,
               pct=rec["pct_of_floor"], mode=mode, rows={})
    del run

    # rows k: one forward of k rows at depth (speculative verification pass)
    for k in a.rows:
        try:
            rids = torch.randint(3, cfg.vocab_size, (1, k), device=dev, generator=gen)
            rpos = torch.arange(depth, depth + k, device=dev)[None]
            rcpos = rpos[0].clone()
            rout = torch.zeros(1, k, dtype=torch.long, device=dev)

            def body():
                rout.copy_(fwd(rids, rpos, rcpos).argmax(-1))

            rrun, rmode = maybe_graph(body, lambda: set_cache_pos(cache, depth), dev,
                                      not a.no_graph, f"{k}-row pass")
            set_cache_pos(cache, depth); rrun(); sync(dev)  # warm-up
            ts = []
            for _ in range(a.reps * 5):
                set_cache_pos(cache, depth)
                ts.append(timed_ms(rrun, dev))
            rb = common["weight_bytes_read"] + kv_tok * (depth + k)
            rfloor = rb / (common["bw_copy_gbs"] * 1e6)
            rs = stats(ts)
            emit(dict(base, kind="rows", rows=k, mode=rmode, bytes_per_pass=rb, floor_ms=rfloor,
                      pct_of_floor=100 * rfloor / rs["ms_median"], **rs))
            log(f"  rows {k} depth {depth}: {rs['ms_median']:.3f} ms/pass (min {rs['ms_min']:.3f}), "
                f"floor {rfloor:.3f} ms, {rmode}")
            row["rows"][k] = rs["ms_median"]
            del rrun
        except Exception as e:
            fails += 1
            oom = isinstance(e, torch.cuda.OutOfMemoryError)
            log(f"  FAILED rows {k} depth {depth}: {'OUT OF MEMORY: ' if oom else ''}{type(e).__name__}: {e}")
            emit(dict(base, kind="rows", rows=k, error=f"{type(e).__name__}: {e}"))
    del cache
    return row, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="llama2-7b-128k", help="one or more of: " + ", ".join(PRESETS))
    ap.add_argument("--depths", default="32768,65536,122880")
    ap.add_argument("--n", type=int, default=64, help="decoded tokens per timed run")
    ap.add_argument("--rows", default="1,2,4,8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="peer_torch.jsonl", help="JSON lines, appended")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float16", choices=("float16", "float32", "bfloat16"))
    ap.add_argument("--prefill", action="store_true", help="real chunked prefill instead of random K/V")
    ap.add_argument("--chunk", type=int, default=4096, help="prefill tokens per forward")
    ap.add_argument("--check", action="store_true", help="compare greedy tokens with a plain eager loop")
    ap.add_argument("--no-graph", action="store_true", help="time eager steps, no CUDA graphs")
    ap.add_argument("--bw-mib", type=int, default=None, help="copy size (default 2048 cuda, 256 cpu)")
    a = ap.parse_args()
    a.depths = [int(x) for x in a.depths.split(",") if x]
    a.rows = [int(x) for x in a.rows.split(",") if x]
    presets = [p for p in a.preset.split(",") if p]
    bad = [p for p in presets if p not in PRESETS]
    if bad or not a.depths or not a.rows or a.n < 1 or a.reps < 1:
        ap.error(f"bad arguments (unknown presets {bad}?)")
    dev, dtype = torch.device(a.device), getattr(torch, a.dtype)
    torch.set_grad_enabled(False)
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or "cpu"
    bw = copy_bw(dev, a.bw_mib or (2048 if dev.type == "cuda" else 256))
    log(f"peer_torch: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"device {gpu}, dtype {a.dtype}")
    log(f"  copy bandwidth {bw:.1f} GB/s as (read + written)/time (about {bw / 2:.1f} GB/s each way); floors use {bw:.1f}")
    fails, table = 0, []
    with open(a.out, "a") as out:
        def emit(rec):
            out.write(json.dumps(rec) + "\n"); out.flush()

        for name in presets:
            common = dict(tool="peer_torch", preset=name, torch=torch.__version__,
                          transformers=transformers.__version__, python=platform.python_version(),
                          device=str(dev), device_name=gpu, dtype=a.dtype, n=a.n, reps=a.reps,
                          batch=1, attn="sdpa", weights="random normal std 0.02", bw_copy_gbs=bw,
                          bw_note="(bytes read + bytes written) / time of a device copy_")
            try:
                cfg = make_config(name, max(a.depths) + a.n + max(a.rows) + 8)
                t0 = time.perf_counter()
                model, dtype_kw = build_model(cfg, dev, dtype)
                sync(dev)
                wtot, wread = weight_bytes(model, cfg)
                hd = cfg.hidden_size // cfg.num_attention_heads
                kvb = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * hd * dtype.itemsize
                rope = getattr(cfg, "rope_parameters", None) or {
                    "rope_theta": cfg.rope_theta, "rope_scaling": getattr(cfg, "rope_scaling", None)}
                log(f"{name}: built in {time.perf_counter() - t0:.1f} s on {dev} ({dtype_kw}=), "
                    f"{wtot / 1e9:.3f} GB weights ({wread / 1e9:.3f} GB read per token), "
                    f"KV {kvb} B/position, rope {rope}, attn {model.config._attn_implementation}")
            except Exception as e:
                fails += 1
                log(f"FAILED to build {name}: {type(e).__name__}: {e}")
                emit(dict(common, error=f"build: {type(e).__name__}: {e}"))
                model = None; free(dev)
                continue
            common.update(weight_bytes=wtot, weight_bytes_read=wread, kv_bytes_per_pos=kvb,
                          rope=rope, config={k: getattr(cfg, k) for k in KEYS})
            for depth in a.depths:
                try:
                    row, f = run_depth(a, model, cfg, dev, dtype, depth, common, emit)
                    fails += f
                    table.append(dict(row, preset=name))
                except Exception as e:
                    fails += 1
                    oom = isinstance(e, torch.cuda.OutOfMemoryError)
                    log(f"  FAILED depth {depth}: {'OUT OF MEMORY: ' if oom else ''}{type(e).__name__}: {e}")
                    if not oom:
                        traceback.print_exc(limit=4)
                    emit(dict(common, depth=depth, error=f"{type(e).__name__}: {e}"))
                free(dev)
            del model
            free(dev)
    log(f"\n{'preset':<15} {'device':<24} {'depth':>7} {'ms/tok':>8} {'min':>8} {'floor':>8} "
        f"{'%floor':>6}  " + " ".join(f"{'k=' + str(k) + ' ms':>9}" for k in a.rows) + "  mode")
    for r in table:
        log(f"{r['preset']:<15} {gpu[:24]:<24} {r['depth']:>7} {r['med']:>8.3f} {r['mn']:>8.3f} "
            f"{r['floor']:>8.3f} {r['pct']:>5.0f}%  " +
            " ".join(f"{r['rows'][k]:>9.3f}" if k in r["rows"] else f"{'-':>9}" for k in a.rows) +
            f"  {r['mode']}")
    log(f"{'prefilled' if a.prefill else 'K/V cache filled with random values (no prefill)'}; "
        f"floor = (weights read + KV at depth + n/2) / {bw:.1f} GB/s copy bandwidth; "
        f"{fails} failure(s); results appended to {a.out}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
