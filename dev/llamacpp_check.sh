#!/bin/sh
# dev/llamacpp_check.sh — does llama.cpp load what `triforce convert` writes, and decode it
# the same way? stories260K is exported as a Hugging Face directory (two safetensors
# shards, tokenizer.json, rotate-half q/k rows), converted back to GGUF (f32 and q8_0), and
# both files are run greedily by llama.cpp (the prebuilt binaries of the node-llama-cpp
# npm package) and by triforce; the token ids must be equal. Needs the npm registry.
set -eu
B=${BUILD:-build}
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
[ -f "$S260" ] || { echo "llamacpp_check: skipped: $S260 not found"; exit 0; }
W=${TMPDIR:-/tmp}/tf_llamacpp_check
mkdir -p "$W"
make -s "$B/triforce" "$B/dev/export_hf"
rm -rf "$W/hf"
"$B/dev/export_hf" "$S260" "$W/hf" 2
"$B/triforce" convert "$W/hf" "$W/conv-f32.gguf"
"$B/triforce" convert "$W/hf" "$W/conv-q8_0.gguf" q8_0
if [ ! -d "$W/npm/node_modules/node-llama-cpp" ]; then
    mkdir -p "$W/npm"
    (cd "$W/npm" && npm init -y > /dev/null && npm install --no-audit --no-fund node-llama-cpp@3 > /dev/null)
fi
cat > "$W/npm/greedy.mjs" <<'JS'
import {getLlama} from "node-llama-cpp";
const [,, modelPath, prompt, n] = process.argv;
const llama = await getLlama({gpu: false, build: "never"});
const model = await llama.loadModel({modelPath});
const seq = (await model.createContext({contextSize: 512})).getSequence();
const out = [];
for await (const t of seq.evaluate([model.tokens.bos, ...model.tokenize(prompt)], {temperature: 0})) {
    out.push(t);
    if (out.length >= Number(n)) break;
}
console.log(model.detokenize(out));
JS
fail=0
for f in "$W/conv-f32.gguf" "$W/conv-q8_0.gguf"; do
    a=$(cd "$W/npm" && node greedy.mjs "$f" "Once upon a time" 40 2> /dev/null)
    b=$("$B/triforce" generate -m "$f" -p "Once upon a time" --temp 0 -n 40 2> /dev/null | sed 's/^Once upon a time//')
    if [ "$a" = "$b" ]; then echo "same   $(basename "$f"): $a"; else echo "DIFFER $(basename "$f"):"; echo "  llama.cpp: $a"; echo "  triforce:  $b"; fail=1; fi
done
exit $fail
