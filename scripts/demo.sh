#!/usr/bin/env bash
# demo.sh — the main job on the default real model (make demo): fetch
# SmolLM2-135M-Instruct (scripts/get-models.sh), then a TriForce generation
# over a long prompt (about 6,500 tokens: this repository's own README and
# design notes, so no other data is needed), greedy, with --compare: the same
# prompt decoded autoregressively too, the speedup and whether the two outputs
# are identical. Exit status non-zero if a step fails or the outputs differ.
#
#   make demo                 (TRIFORCE=./triforce N=128 MODE=triforce)
set -euo pipefail
cd "$(dirname "$0")/.."
TF=${TRIFORCE:-./triforce}
N=${N:-128}
MODE=${MODE:-triforce}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
bash scripts/get-models.sh
mkdir -p build
PROMPT=build/demo-prompt.txt
# no pipe into head: under pipefail, cat's SIGPIPE would fail the script
cat README.md docs/ARCHITECTURE.md docs/SPECULATIVE.md docs/RETRIEVAL.md > "$PROMPT.all"
head -c 20000 "$PROMPT.all" > "$PROMPT"
rm -f "$PROMPT.all"
echo "demo: $MODEL, mode $MODE (the target's first 6 of 30 layers draft over a StreamingLLM cache,"
echo "demo: the target over a 512-token retrieval cache drafts for the full cache), prompt $PROMPT"
"$TF" generate -m "$MODEL" -f "$PROMPT" --mode "$MODE" --draft-layers 6 --budget 512 \
    --temp 0 -n "$N" --ignore-eos --compare > build/demo-output.txt
echo "demo: the continuation of the prompt (build/demo-output.txt holds prompt + continuation):"
tail -c +"$(( $(wc -c < "$PROMPT") + 1 ))" build/demo-output.txt
