#!/usr/bin/env python3
"""The tables of bench/peer.sh: medians of the interleaved llama.cpp and
triforce runs it recorded, their ratios, and each decode figure beside its
floor at the bandwidth measured in the same runs.

    python bench/peer_report.py MANIFEST RUN_INFO OUT.md OUT.jsonl

MANIFEST: one line per repetition, tab-separated: label, weight type, model
file, prompt tokens, repetition, llama.cpp's JSON file (bench/peer_llamacpp.py),
triforce's JSON-lines file (`triforce bench -o json`). RUN_INFO: "key: value"
lines (machine, versions, settings), copied into both outputs. Writes OUT.md
(a header and one table) and OUT.jsonl (a "run" object, then one "result"
object per model, type and context with every repetition's figures).
Standard library only.
"""
import json
import statistics
import sys


def load_manifest(path):
    groups = {}  # (label, type, ctx) -> list of (llama.cpp run, triforce rows)
    order = []
    for line in open(path):
        if not line.strip():
            continue
        label, wtype, model, ctx, rep, lc_file, tf_file = line.rstrip("\n").split("\t")
        lc = json.loads(open(lc_file).read())
        tf = [json.loads(x) for x in open(tf_file) if x.strip()]
        key = (label, wtype, int(ctx))
        if key not in groups:
            groups[key] = {"model": model, "runs": []}
            order.append(key)
        groups[key]["runs"].append((int(rep), lc, tf))
    return order, groups


def tf_row(rows, test):
    found = [r for r in rows if r["test"] == test]
    if len(found) != 1:
        raise SystemExit(f"peer_report: expected one '{test}' row from triforce bench, found {len(found)}")
    return found[0]


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, nd=1):
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{nd}f}" if abs(x) >= 1 else f"{x:.{nd + 1}f}"


def main():
    if len(sys.argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    manifest, run_info, out_md, out_jsonl = sys.argv[1:]
    info = {}
    for line in open(run_info):
        k, _, v = line.rstrip("\n").partition(": ")
        info[k] = v
    order, groups = load_manifest(manifest)
    results = []
    for key in order:
        label, wtype, ctx = key
        g = groups[key]
        runs = sorted(g["runs"], key=lambda r: r[0])
        lc_pp = [r[1]["prefill_tok_s"] for r in runs]
        lc_tg = [r[1]["decode_ms_per_tok"] for r in runs]
        lc_perf_pp = [1e3 * r[1]["perf"]["n_p_eval"] / r[1]["perf"]["t_p_eval_ms"] for r in runs]
        lc_perf_tg = [r[1]["perf"]["t_eval_ms"] / max(r[1]["perf"]["n_eval"], 1) for r in runs]
        tf_pp = [tf_row(r[2], "prefill")["median"] for r in runs]
        tf_dec = [tf_row(r[2], "decode") for r in runs]
        tf_tg = [d["median"] for d in tf_dec]
        bw = [tf_row(r[2], "membw")["median"] for r in runs]
        floor = [d["bound"] for d in tf_dec]
        lc0, tfd0 = runs[0][1], tf_dec[0]
        if any(r[1].get("kv", "f16") != d.get("kv", "f16") for r, d in zip(runs, tf_dec)):
            sys.exit(f"peer_report: {label} {wtype} at {ctx}: the engines ran different KV cache types")
        res = {
            "kind": "result", "model": label, "weights": wtype, "file": g["model"],
            "n_params": lc0["n_params"], "model_bytes": lc0["model_bytes"], "llamacpp_desc": lc0["model_desc"],
            "ctx": ctx, "n_gen": lc0["n_gen"], "threads": lc0["threads"], "batch": lc0["batch"],
            "flash_attn": lc0["flash_attn"], "kv": lc0.get("kv", "f16"), "reps": len(runs), "decode_fill": tfd0["fill"],
            "llamacpp": {"prefill_tok_s": med(lc_pp), "decode_ms_per_tok": med(lc_tg),
                         "prefill_tok_s_runs": lc_pp, "decode_ms_per_tok_runs": lc_tg,
                         "perf_prefill_tok_s_runs": lc_perf_pp, "perf_decode_ms_per_tok_runs": lc_perf_tg},
            "triforce": {"prefill_tok_s": med(tf_pp), "decode_ms_per_tok": med(tf_tg),
                         "prefill_tok_s_runs": tf_pp, "decode_ms_per_tok_runs": tf_tg},
            "bw_gbs": med(bw), "bw_gbs_runs": bw,
            "decode_floor_ms": med(floor),
            "decode_mb_per_tok": med(floor) * med(bw) if floor and bw else None,
        }
        res["prefill_ratio"] = res["triforce"]["prefill_tok_s"] / res["llamacpp"]["prefill_tok_s"]
        res["decode_ratio"] = res["llamacpp"]["decode_ms_per_tok"] / res["triforce"]["decode_ms_per_tok"]
        results.append(res)

    with open(out_jsonl, "w") as f:
        f.write(json.dumps({"kind": "run", **info}) + "\n")
        for r in results:
            f.write(json.dumps(r) + "\n")

    with open(out_md, "w") as f:
        f.write("# triforce and llama.cpp side by side (`sh bench/peer.sh`)\n\n")
        for k, v in info.items():
            f.write(f"- {k}: {v}\n")
        f.write("\n| model | weights | GiB | ctx | prefill tok/s llama.cpp | triforce | ratio | "
                "decode ms/tok llama.cpp | triforce | ratio | floor ms | MB/tok | DRAM GB/s |\n"
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
        for r in results:
            f.write(f"| {r['model']} | {r['weights']} | {r['model_bytes'] / 2**30:.2f} | {r['ctx']} | "
                    f"{fmt(r['llamacpp']['prefill_tok_s'])} | {fmt(r['triforce']['prefill_tok_s'])} | "
                    f"{r['prefill_ratio']:.2f} | {fmt(r['llamacpp']['decode_ms_per_tok'], 2)} | "
                    f"{fmt(r['triforce']['decode_ms_per_tok'], 2)} | {r['decode_ratio']:.2f} | "
                    f"{fmt(r['decode_floor_ms'], 2)} | {fmt(r['decode_mb_per_tok'])} | {fmt(r['bw_gbs'])} |\n")
        reps = results[0]["reps"] if results else 0
        fill = results[0]["decode_fill"] if results else ""
        f.write(("\nOne repetition" if reps == 1 else f"\nMedians of {reps} repetitions") +
                "; the engines take turns, each repetition starting with the other. Ratio: triforce's speed over llama.cpp's (above 1: triforce faster), prefill tok/s over "
                "tok/s and decode llama.cpp's ms/tok over triforce's. Prefill: the first ctx tokens of the text "
                "(the same ids in both) into an empty cache. Decode: greedy tokens after that prompt, "
                "ms per token. Floor: the bytes a decoded token reads (every weight once, the untied "
                "embedding table by one row, the KV cache (of the header's type) at the mean context; MB/tok) over the DRAM read "
                "bandwidth triforce bench measures at the start of each of its runs (GB/s). GiB: the weights "
                "as llama.cpp counts them.")
        if fill and fill != "text":
            f.write(" triforce's decode: ctx filled with random K/V (FILL=random) instead of a prefill of the text; "
                    "llama.cpp's after its prefill.")
        f.write(" Raw runs, llama.cpp's own counters (llama_perf_context) and the spreads: the .jsonl file.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
