#!/bin/sh
# eval_plot.sh — plots of bench/eval_smollm2.sh's results (gnuplot; skipped
# without it): docs/img/accept-smollm2.png, acceptance of the middle level by
# budget, retrieval vs StreamingLLM cache, per text and context.
set -eu
OUT=bench/results
TMP=${TMPDIR:-/tmp}/tf-eval-plot.$$
command -v gnuplot > /dev/null || { echo "eval_plot: skipped: gnuplot not found"; exit 0; }
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
plot=""
for text in pride needle; do
    f=$OUT/accept-smollm2-$text.jsonl
    [ -s "$f" ] || continue
    for ctx in $(sed -n 's/.*"context": \([0-9]*\).*/\1/p' "$f" | sort -un); do
        for cache in retrieval streaming; do
            grep "\"context\": $ctx," "$f" | grep "\"cache\": \"$cache\"" |
                sed -n 's/.*"budget": \([0-9]*\).*"acceptance": \([0-9.]*\).*/\1 \2/p' > "$TMP/$text-$ctx-$cache.dat"
            [ -s "$TMP/$text-$ctx-$cache.dat" ] || continue
            dt=1; [ "$cache" = streaming ] && dt=2
            plot="$plot '$TMP/$text-$ctx-$cache.dat' using 1:2 with linespoints dt $dt title '$text $ctx $cache',"
        done
    done
done
[ -n "$plot" ] || { echo "eval_plot: nothing to plot"; exit 0; }
gnuplot <<GP
set terminal png size 900,560
set output 'docs/img/accept-smollm2.png'
set title 'SmolLM2-135M: acceptance of the middle level (target weights over a small cache)'
set xlabel 'cache budget (tokens)'
set ylabel 'acceptance rate'
set logscale x 2
set key bottom right
plot ${plot%,}
GP
echo "wrote docs/img/accept-smollm2.png"
