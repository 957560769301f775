#!/usr/bin/env bash
# demo.sh — the main job on the default real model (make demo): fetch
# SmolLM2-135M-Instruct (scripts/get-models.sh), then a TriForce generation
# over a long prompt (about 6,300 tokens: this repository's design notes, so
# no other data is needed, and editing the README does not move the figures),
# greedy, with --compare: the same prompt decoded autoregressively too, the speedup and whether the two outputs
# are identical. Two runs: the three-level hierarchy (text lookup drafts for
# the target over its retrieval cache, which drafts for the full cache), then
# text lookup drafting for the target directly. Exit status non-zero if a step
# fails or the outputs differ.
#
#   make demo                 (TRIFORCE=./triforce N=128)
set -euo pipefail
cd "$(dirname "$0")/.."
TF=${TRIFORCE:-./triforce}
N=${N:-128}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
bash scripts/get-models.sh
mkdir -p build
PROMPT=build/demo-prompt.txt
# no pipe into head: under pipefail, cat's SIGPIPE would fail the script
cat docs/ARCHITECTURE.md docs/SPECULATIVE.md docs/RETRIEVAL.md > "$PROMPT.all"
head -c 20000 "$PROMPT.all" > "$PROMPT"
rm -f "$PROMPT.all"
echo "demo: $MODEL, prompt $PROMPT"
echo "demo: 1. mode triforce: text lookup (no model) drafts for the target over a 512-token retrieval"
echo "demo:    cache, which drafts for the target over its full cache"
"$TF" generate -m "$MODEL" -f "$PROMPT" --mode triforce --draft-lookup 4 --budget 512 --gamma1 4 --gamma2 10 \
    --temp 0 -n "$N" --ignore-eos --compare > build/demo-output.txt
echo "demo: 2. mode draft: text lookup drafts for the target directly"
"$TF" generate -m "$MODEL" -f "$PROMPT" --mode draft --draft-lookup 4 --gamma2 10 \
    --temp 0 -n "$N" --ignore-eos --compare > build/demo-output-draft.txt
cmp -s build/demo-output.txt build/demo-output-draft.txt || { echo "demo: the two runs' outputs differ"; exit 1; }
echo "demo: the continuation of the prompt (build/demo-output.txt holds prompt + continuation):"
tail -c +"$(( $(wc -c < "$PROMPT") + 1 ))" build/demo-output.txt
