#!/bin/sh
# test_bench.sh — `triforce bench`: bad flags fail with a message naming the flag and a
# non-zero exit; on stories260K (from $TF_SHARED_DIR or ../shared; skipped where absent)
# tiny runs in every output format parse (json with python3's json module, csv column
# counts, md tables) and carry positive, finite numbers, and speculative output equals ar's;
# --fill random decodes over random K/V in mode ar only, labelled so in every format; --bw-gbs
# replaces the probe and says so; --device cuda without a device fails with the reason; --temp
# samples (the texts then not compared with ar's).
# Reports with cmocka's markers, which tests/run.sh counts. Runs from the repository root.
B=${BUILD:-build}
TF=$B/triforce
W=$B/test_bench
. tests/common/marks.sh

[ -x "$TF" ] || { echo "test_bench: $TF not built"; exit 1; }
rm -rf "$W"; mkdir -p "$W" || exit 1

# expect_fail NAME PATTERN ARGS...: exit status 2 and PATTERN (fixed text) on stderr
expect_fail() {
    name=$1; pat=$2; shift 2
    echo "[ RUN      ] $name"
    "$TF" bench "$@" > "$W/out" 2> "$W/err"; rc=$?
    if [ $rc -ne 0 ] && grep -qF -- "$pat" "$W/err" && [ ! -s "$W/out" ]; then ok "$name"
    else echo "exit $rc, stderr:"; cat "$W/err"; bad "$name"; fi
}

echo "[ RUN      ] bench_help"
if "$TF" bench --help > "$W/help" 2>&1 && grep -q -- '--rows K' "$W/help" && grep -q -- '-o, --output' "$W/help" &&
    grep -q -- '-d, --n-depth' "$W/help"; then ok bench_help; else cat "$W/help"; bad bench_help; fi

# Flags are checked before the model is read, so no model is needed here.
expect_fail bench_no_model "-m MODEL is required" -p 16
expect_fail bench_bad_output "-o 'xml': expected md, json or csv" -m x.gguf -o xml
expect_fail bench_bad_list "--n-prompt '16,,32': expected a comma-separated list" -m x.gguf -p 16,,32
expect_fail bench_bad_depth "--n-depth '-5': expected" -m x.gguf -d -5
expect_fail bench_rows_range "--rows '999': expected a comma-separated list of up to 16 integers in [0, 256]" -m x.gguf --rows 999
expect_fail bench_bad_mode "--mode 'ar,fast': expected" -m x.gguf --mode ar,fast
expect_fail bench_mode_needs_draft "--mode triforce needs a draft: -md DRAFT.gguf, --draft-layers K or --draft-lookup N" -m x.gguf --mode triforce
expect_fail bench_bad_reps "--repetitions '0': expected an integer in [1, 1000]" -m x.gguf -r 0
expect_fail bench_unknown_flag "unknown option '--chat'" -m x.gguf --chat
expect_fail bench_missing_value "option --n-gen needs a value" -m x.gguf -n
expect_fail bench_missing_model "x-missing.gguf" -m "$W/x-missing.gguf" -p 16
expect_fail bench_bad_fill "--fill 'zeros': expected text or random" -m x.gguf --fill zeros
expect_fail bench_fill_random_ar_only "--fill random decodes in mode ar only (--mode ar)" -m x.gguf --fill random --mode ar,retrieval
expect_fail bench_bad_device "--device 'gpu': expected cuda, cpu or auto" -m x.gguf --device gpu
expect_fail bench_bad_bw "--bw-gbs '0': expected a number in [1, 1e+06]" -m x.gguf --bw-gbs 0
expect_fail bench_temp_fill_random "--temp: --fill random decodes greedily" -m x.gguf --fill random --temp 0.5

SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
if [ ! -f "$S260" ]; then
    for t in bench_md bench_json bench_csv bench_text bench_fill_random bench_bw_given bench_cuda_absent bench_sampled bench_text_short; do skipped "$t" "$S260 not found"; done
elif ! command -v python3 > /dev/null 2>&1; then
    for t in bench_md bench_json bench_csv bench_text bench_fill_random bench_bw_given bench_cuda_absent bench_sampled bench_text_short; do skipped "$t" "python3 not found"; done
else
    # 1 membw + 2 prefill + 2 depths x 2 row counts + 2 depths x 3 modes = 13 rows
    ARGS="-m $S260 -p 16,32 -n 8 -d 0,64 --rows 1,3 --mode ar,retrieval,triforce --draft-layers 2 --budget 32 -r 2 -t 2 --bw-mib 16"
    echo "[ RUN      ] bench_json"
    # every row says what produced it: the library version and attention kernel `triforce --version` names
    if $TF --version > "$W/version" && $TF bench $ARGS -o json > "$W/o.jsonl" 2> "$W/err" &&
        python3 - "$W/o.jsonl" "$W/version" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ver = open(sys.argv[2]).read().split("\n")
version, attn = ver[0].split(" ")[1], ver[1].split("attention ")[1]
assert all(r["version"] == version and r["attn"] == attn and r["temp"] == 0 and r["seed"] is None for r in rows), \
    (version, attn, rows[0])
assert len(rows) == 13, len(rows)
kinds = [r["test"] for r in rows]
assert kinds.count("membw") == 1 and kinds.count("prefill") == 2 and kinds.count("pass") == 4 \
    and kinds.count("decode") == 6, kinds
def pos(x): return isinstance(x, (int, float)) and math.isfinite(x) and x > 0
# the compute peaks: measured where the CPU has the instructions (its flags read here), the same on every row
try:
    flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
except (OSError, StopIteration):
    flags = None
if flags is not None:
    assert pos(rows[0]["peak_f32_gflops"]) == ("avx512f" in flags or ("avx2" in flags and "fma" in flags)), rows[0]
    assert pos(rows[0]["peak_int8_gops"]) == ("avx512_vnni" in flags and "avx512f" in flags), rows[0]
    assert pos(rows[0]["peak_bf16_gflops"]) == ("avx512_bf16" in flags and "avx512f" in flags), rows[0]
assert all(r["peak_int8_gops"] == rows[0]["peak_int8_gops"] and r["peak_f32_gflops"] == rows[0]["peak_f32_gflops"]
           and r["peak_bf16_gflops"] == rows[0]["peak_bf16_gflops"] for r in rows), rows
for r in rows:
    for k in ("model", "threads", "mode", "depth", "median", "bw_gbs", "unit"):
        assert k in r, (k, r)
    assert pos(r["median"]) and pos(r["bw_gbs"]) and r["threads"] == 2, r
    if r["test"] != "membw":
        assert pos(r["min"]) and pos(r["max"]) and r["min"] <= r["median"] <= r["max"], r
        assert pos(r["bound"]) and pos(r["pct_of_bound"]), r
    if r["test"] == "prefill": assert pos(r["gflops"]) and r["unit"] == "tok/s", r
    if r["test"] == "pass":
        assert r["fill"] == "random" and r["unit"] == "ms", r
        # the compute floor, counted here from stories260K's shape (f32 weights: FMA; head_dim 8: f32
        # attention, a multiply and an add apiece): the rows through 5 layers and the logits, row i
        # attending to depth + i keys
        k, d = r["n"], r["depth"]
        w = k * (5 * (64 * 8 * (2 * 8 + 2 * 4) + 3 * 64 * 172) + 64 * 512)
        att = 2 * 5 * 8 * 8 * (k * d + k * (k + 1) / 2)
        f32 = r["peak_f32_gflops"]
        if pos(f32):
            want = 1e3 * (w / (f32 * 1e9 / 2) + att / (f32 * 1e9 / 4))
            assert pos(r["compute_bound"]) and abs(r["compute_bound"] / want - 1) < 1e-4, (want, r)
            assert abs(r["pct_of_bound"] - 100 * max(r["bound"], r["compute_bound"]) / r["median"]) < 1e-3 * r["pct_of_bound"], r
        else:
            assert r["compute_bound"] is None, r
    else:
        assert r["compute_bound"] is None, r
    if r["test"] == "decode":
        assert pos(r["tok_s"]) and pos(r["tok_per_target_pass"]) and r["levels"], r
        assert all(pos(L["ms_per_pass"]) for L in r["levels"]), r
        if r["mode"] == "ar":
            assert r["speedup"] is None and len(r["levels"]) == 1, r
        else:
            assert pos(r["speedup"]) and r["same_as_ar"] is True, r
            assert len(r["levels"]) == (3 if r["mode"] == "triforce" else 2), r
            assert 0 <= r["levels"][0]["acceptance"] <= 1, r
PY
    then ok bench_json; else cat "$W/err"; cat "$W/o.jsonl"; bad bench_json; fi

    echo "[ RUN      ] bench_csv"
    if $TF bench $ARGS -o csv > "$W/o.csv" 2> "$W/err" && python3 - "$W/o.csv" <<'PY'
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
head, data = rows[0], rows[1:]
assert len(data) == 13, len(data)
assert all(len(r) == len(head) for r in data), [len(r) for r in data]
col = {k: i for i, k in enumerate(head)}
for r in data:
    v = float(r[col["median"]]); assert math.isfinite(v) and v > 0, r
    if r[col["test"]] != "membw":
        b = float(r[col["bound"]]); assert math.isfinite(b) and b > 0, r
    if r[col["test"]] == "decode" and r[col["mode"]] != "ar":
        assert r[col["same_as_ar"]] == "yes" and float(r[col["speedup"]]) > 0, r
PY
    then ok bench_csv; else cat "$W/err"; cat "$W/o.csv"; bad bench_csv; fi

    echo "[ RUN      ] bench_md"
    if $TF bench $ARGS > "$W/o.md" 2> "$W/err" && python3 - "$W/o.md" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
tables, cur = [], None
for l in lines:
    if l.startswith("|"):
        if cur is None: cur = []; tables.append(cur)
        cur.append([c.strip() for c in l.strip().strip("|").split("|")])
    else:
        cur = None
assert len(tables) == 3, len(tables)
for t, n in zip(tables, (2, 4, 6)):
    assert len(t) == 2 + n, (len(t), t)
    assert all(len(r) == len(t[0]) for r in t), t
    assert all(set(c) <= set("-: ") for c in t[1]), t[1]
    for r in t[2:]:
        assert r[0] == "stories260K.gguf" and r[1] == "2", r
        v = float(r[t[0].index("ms/pass" if "ms/pass" in t[0] else "ms/tok" if "ms/tok" in t[0] else "tok/s")].split()[0])
        assert v > 0, r
decode = tables[2]
eq = decode[0].index("= ar")
assert [r[eq] for r in decode[2:]].count("yes") == 4, decode
assert any(l.startswith("read bandwidth: ") for l in lines)
try:
    flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
except (OSError, StopIteration):
    flags = []
if "avx512f" in flags or ("avx2" in flags and "fma" in flags):
    assert any(l.startswith("compute peak: int8 ") and " GFLOP/s (FMA), 2 threads" in l for l in lines), lines[:8]
passes = tables[1]
assert passes[0][4:7] == ["floor ms", "compute floor ms", "% of floor"], passes[0]
PY
    then ok bench_md; else cat "$W/err"; cat "$W/o.md"; bad bench_md; fi

    # -f: the context comes from the text (here this repository's README)
    echo "[ RUN      ] bench_text"
    if $TF bench -m "$S260" -f README.md -p 32 -n 4 -d 32 --rows 1 --mode ar -r 1 --bw-mib 16 -t 2 -o csv \
        > "$W/t.csv" 2> "$W/err" && [ "$(grep -c ',text$' "$W/t.csv")" -eq 2 ] && grep -q ',random$' "$W/t.csv"
    then ok bench_text; else cat "$W/err" "$W/t.csv"; bad bench_text; fi

    # --fill random: ar's decode tests over a cache of random K/V, labelled so in every format
    # (json/csv: fill "random K/V"; md: the test name and a note); no text is needed up to the depth
    echo "[ RUN      ] bench_fill_random"
    FR="-m $S260 -p 0 -n 4 -d 0,3000 --rows 0 --fill random -r 2 -t 2 --bw-mib 16"
    if $TF bench $FR -o json > "$W/f.jsonl" 2> "$W/err" && grep -q 'decode ctx filled with random K/V' "$W/err" &&
        python3 - "$W/f.jsonl" <<'PY' &&
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
dec = [r for r in rows if r["test"] == "decode"]
assert [r["depth"] for r in dec] == [0, 3000], rows
for r in dec:
    assert r["mode"] == "ar" and r["fill"] == "random K/V" and r["n"] == 4, r
    assert math.isfinite(r["median"]) and r["median"] > 0 and r["bound"] > 0 and r["tok_per_target_pass"] == 1, r
PY
        $TF bench $FR -o csv 2> /dev/null | grep -c ',random K/V$' | grep -qx 2 &&
        $TF bench $FR 2> /dev/null > "$W/f.md" && [ "$(grep -c '| tg4 @ d[0-9]*, ctx filled with random K/V |' "$W/f.md")" -eq 2 ] &&
        grep -q '^ctx filled with random K/V (--fill random)' "$W/f.md"
    then ok bench_fill_random; else cat "$W/err" "$W/f.jsonl" "$W/f.md"; bad bench_fill_random; fi

    # --bw-gbs: the bounds use the given bandwidth (no probe), and the reports say where it came from
    echo "[ RUN      ] bench_bw_given"
    BG="-m $S260 -p 16 -n 0 -d 64 --rows 1 -r 1 -t 2 --bw-gbs 50"
    if $TF bench $BG -o json > "$W/g.jsonl" 2> "$W/err" && ! grep -q 'read bandwidth (' "$W/err" &&
        python3 - "$W/g.jsonl" <<'PY' &&
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[0]["test"] == "membw" and rows[0]["median"] == 50 and rows[0]["device"] == "cpu", rows[0]
assert all(r["bw_gbs"] == 50 for r in rows), rows
PY
        $TF bench $BG 2> /dev/null | grep -q '^bandwidth of the bounds: 50.00 GB/s (given by --bw-gbs)'
    then ok bench_bw_given; else cat "$W/err" "$W/g.jsonl"; bad bench_bw_given; fi

    # --device cuda: on a build or machine without a device, a clear failure and nothing on stdout
    # but the header; where a GPU is present this test is not the place to run it
    if "$TF" bench -m "$S260" -p 16 -n 0 --rows 0 -r 1 --device cuda --bw-gbs 100 > "$W/c.out" 2> "$W/c.err"; then
        skipped bench_cuda_absent "a CUDA device is present here"
    else
        echo "[ RUN      ] bench_cuda_absent"
        if grep -qE 'no CUDA device|no CUDA backend' "$W/c.err"; then ok bench_cuda_absent
        else cat "$W/c.err"; bad bench_cuda_absent; fi
    fi

    # --temp: sampled decoding, every mode from the same seed; the texts are not compared with ar's
    echo "[ RUN      ] bench_sampled"
    # sampled under the keyed coupling (the default) every mode's text is ar's; under the residual one not compared
    if $TF bench -m "$S260" -p 0 -n 16 -d 64 --rows 0 --mode ar,retrieval,triforce --draft-layers 2 --budget 32 \
        -r 2 -t 2 --bw-mib 16 --temp 0.6 --top-p 0.9 -s 5 -o json > "$W/s.jsonl" 2> "$W/err" &&
        grep -q 'temp 0.6, top-k 40, top-p 0.9, min-p 0.05, seed 5, coupling keyed' "$W/err" &&
        $TF bench -m "$S260" -p 0 -n 16 -d 64 --rows 0 --mode ar,triforce --draft-layers 2 --budget 32 \
        -r 1 -t 2 --bw-mib 16 --temp 0.6 --top-p 0.9 -s 5 --coupling residual -o json > "$W/r.jsonl" 2> "$W/err" &&
        grep -q 'seed 5, coupling residual' "$W/err" && python3 - "$W/s.jsonl" "$W/r.jsonl" <<'PY'
import json, math, sys
dec = [r for r in map(json.loads, open(sys.argv[1])) if r["test"] == "decode"]
assert [r["mode"] for r in dec] == ["ar", "retrieval", "triforce"], dec
for r in map(json.loads, open(sys.argv[1])):
    assert r["temp"] == 0.6 and r["seed"] == 5, r
for r in dec:
    assert r["same_as_ar"] is (None if r["mode"] == "ar" else True) and math.isfinite(r["median"]) and r["median"] > 0, r
    if r["mode"] != "ar": assert r["speedup"] > 0 and 0 <= r["levels"][0]["acceptance"] <= 1, r
res = [r for r in map(json.loads, open(sys.argv[2])) if r["test"] == "decode"]
assert [r["mode"] for r in res] == ["ar", "triforce"] and all(r["same_as_ar"] is None for r in res), res
PY
    then ok bench_sampled; else cat "$W/err" "$W/s.jsonl"; bad bench_sampled; fi

    printf 'Once upon a time.\n' > "$W/short.txt"
    expect_fail bench_text_short "gives" -m "$S260" -f "$W/short.txt" -p 512 -n 4 -r 1 --bw-mib 16
fi

rm -rf "$W"
marks_summary
