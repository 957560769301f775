#!/bin/sh
# Table of bench/kvscale.sh's results: per context, the projected 32-layer latency of a
# target step, the KV cache's share of the bytes it reads, the verification pass, the middle
# and draft levels, and the speedup those latencies give at assumed acceptance rates.
set -eu
J=${1:-bench/results/kvscale.jsonl}
awk -v alpha="${ALPHA:-0.92}" -v beta="${BETA:-0.80}" -v g1="${GAMMA1:-2}" -v g2="${GAMMA2:-6}" '
function val(key,   m) { if (match($0, "\"" key "\": [0-9.]+")) { m = substr($0, RSTART, RLENGTH); sub(/.*: /, "", m); return m + 0 } return -1 }
function lab(   m) { match($0, /"label": "[^"]*"/); m = substr($0, RSTART + 10, RLENGTH - 11); return m }
{
    l = lab(); s = val("slots"); r = val("rows"); ms[l, s, r] = val("ms");
    if (l ~ /^target/) { seen[s] = 1; kvb[l, s] = val("kv_bytes"); wb[l] = val("weight_bytes") }
    nlay[l] = val("layers")
}
# head + 32 layers, from runs with nlay["target-a"] and nlay["target-b"] layers
function per(a, b) { return (b - a) / (nlay["target-b"] - nlay["target-a"]) }
function proj(a, b) { return a + (32 - nlay["target-a"]) * per(a, b) }
function exp_tokens(p, g) { return (1 - p ^ (g + 1)) / (1 - p) }
END {
    n = 0; for (s in seen) sl[++n] = s + 0
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (sl[j] < sl[i]) { t = sl[i]; sl[i] = sl[j]; sl[j] = t }
    mid1 = proj(ms["middle-a", 4096, 1], ms["middle-b", 4096, 1])
    mid3 = proj(ms["middle-a", 4096, 3], ms["middle-b", 4096, 3])
    dr = ms["draft", 256, 1]
    lw = per(wb["target-a"], wb["target-b"]); head = wb["target-a"] - nlay["target-a"] * lw
    printf "Llama2-7B-128K shapes, F16 weights and KV, projected to 32 layers (head + 32 x one layer).\n\n"
    printf "| context | ar ms/token | KV share of bytes | verify %d rows ms | middle (B=4096) ms, 1 / %d rows | draft (llama-68m, C_q 256) ms | speedup at alpha=%.2f, beta=%.2f |\n", g2 + 1, g1 + 1, alpha, beta
    printf "|---|---|---|---|---|---|---|\n"
    for (i = 1; i <= n; i++) {
        s = sl[i]
        ar = proj(ms["target-a", s, 1], ms["target-b", s, 1])
        ver = proj(ms["target-a", s, 7], ms["target-b", s, 7])
        kv32 = 32 * per(kvb["target-a", s], kvb["target-b", s]); w32 = head + 32 * lw
        # one target pass verifies g2 middle tokens and emits E2 of them; the middle makes
        # g2 tokens in g2 / E1 passes of g1 + 1 rows, each after g1 draft steps
        e2 = exp_tokens(alpha, g2); e1 = exp_tokens(beta, g1)
        t = ver + (g2 / e1) * (mid3 + g1 * dr)
        printf "| %d | %.1f | %.0f%% | %.1f | %.1f / %.1f | %.2f | %.2fx |\n", s, ar, 100 * kv32 / (kv32 + w32), ver, mid1, mid3, dr, e2 * ar / t
    }
    printf "\nspeedup = E2 x ar / (verify + (gamma2 / E1) x (middle(gamma1+1 rows) + gamma1 x draft)), with E = (1 - a^(g+1)) / (1 - a) tokens per pass; gamma1 = %d, gamma2 = %d; alpha (middle -> target) and beta (draft -> middle) are assumed, not measured.\n", g1, g2
}' "$J"
