#!/bin/sh
# bench/attnbw_ab.sh OLD_ATTNBW NEW_ATTNBW — the attention A/B of docs/BENCHMARKS.md: two builds of
# bench/attnbw.c run interleaved, 3 rounds; one JSON object per run, tagged "old" / "new".
set -eu
[ $# -eq 2 ] || { echo "usage: sh bench/attnbw_ab.sh OLD_ATTNBW NEW_ATTNBW" >&2; exit 2; }
OLD=$1 NEW=$2
for cfg in "--heads 32 --kv-heads 32 --head-dim 128 --slots 65536 --type f16" "--heads 32 --kv-heads 32 --head-dim 128 --slots 65536 --type f32" "--heads 32 --kv-heads 8 --head-dim 128 --slots 65536 --type f16" "--heads 8 --kv-heads 4 --head-dim 8 --slots 65536 --type f16"; do
  for r in 1 2 3; do
    for b in old new; do
      bin=$([ $b = old ] && echo "$OLD" || echo "$NEW")
      $bin $cfg --rows 1,7 --reps 5 | sed "s/^{/{\"bin\": \"$b\", /"
    done
  done
done
