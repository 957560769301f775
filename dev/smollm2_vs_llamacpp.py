#!/usr/bin/env python3
"""SmolLM2-135M (or any GGUF both engines read) against llama.cpp, through
llama-cpp-python from PyPI:

  1. tokenization of the scored text: ids equal to llama.cpp's;
  2. perplexity over BYTES of a novel at -c CTX, llama.cpp's convention
     (windows of CTX tokens with BOS first, second half scored), computed here
     from llama.cpp's logits and by `triforce perplexity`: relative difference
     at most --ppl-rtol (default 5e-4);
  3. greedy continuation (N tokens) of a PROMPT_TOKENS-token prompt cut from
     the novel: the text equal to llama.cpp's (its argmax each step).

    python dev/smollm2_vs_llamacpp.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
        [--text ../shared/text/pride_and_prejudice.txt] [--triforce ./triforce]

Run it with a Python that has llama_cpp (dev/llamacpp_check.sh makes one under
build/). Prints one line per check and a JSON summary; exit status 1 if a
check fails, 2 if an input is missing.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def nll_window(scores, w, first):
    """Sum of -log p(w[j+1] | logits at j) for j in [first, len(w)-1), and count."""
    lg = scores[first:len(w) - 1].astype(np.float64)
    mx = lg.max(axis=1, keepdims=True)
    lse = mx[:, 0] + np.log(np.exp(lg - mx).sum(axis=1))
    tgt = lg[np.arange(lg.shape[0]), np.array(w[first + 1:])]
    return float((lse - tgt).sum()), lg.shape[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--text", default="../shared/text/pride_and_prejudice.txt")
    ap.add_argument("--triforce", default="./triforce")
    ap.add_argument("--bytes", type=int, default=200000)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--prompt-tokens", type=int, default=8000, help="prompt + N stays within the trained 8192")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--ppl-rtol", type=float, default=5e-4)
    ap.add_argument("--json", default=None, help="write the summary here too")
    ap.add_argument("--checks", default="tokenize,perplexity,greedy", help="which checks, comma-separated")
    a = ap.parse_args()
    for p in (a.model, a.text, a.triforce):
        if not os.path.exists(p):
            print(f"skipped: {p} not found", file=sys.stderr)
            return 2
    from llama_cpp import Llama, __version__ as lv

    raw = open(a.text, "rb").read()
    text = raw[:a.bytes].decode("utf-8", errors="ignore")
    tmp = tempfile.mkdtemp(prefix="smollm2-check-")
    tfile = os.path.join(tmp, "text.txt")
    with open(tfile, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    res = {"model": a.model, "text": a.text, "bytes": len(text.encode()), "ctx": a.ctx, "llama_cpp_python": lv}
    ok = True

    checks = set(a.checks.split(","))
    # 1. tokenization
    llm = Llama(model_path=a.model, n_ctx=a.ctx, n_batch=512, logits_all=True, n_threads=a.threads, verbose=False)
    ref = llm.tokenize(text.encode(), add_bos=True, special=False)
    out = subprocess.run([a.triforce, "tokenize", "-m", a.model, "-f", tfile, "--ids"], capture_output=True,
                         text=True, check=True).stdout
    ours = [int(x) for x in out.replace(",", " ").replace("[", " ").replace("]", " ").split()]
    same = ours == ref
    first_diff = next((i for i, (x, y) in enumerate(zip(ours, ref)) if x != y), None)
    res["tokens"] = {"n_llamacpp": len(ref), "n_triforce": len(ours), "identical": same, "first_diff": first_diff}
    print(f"tokenize: {len(ref)} tokens, {'identical' if same else f'DIFFERENT (first at {first_diff})'}")
    ok &= same or "tokenize" not in checks

    # 2. perplexity, llama.cpp's convention
    n_chunk = len(ref) // a.ctx if "perplexity" in checks else 0
    bos = llm.token_bos()
    nll, cnt = 0.0, 0
    t0 = time.time()
    for c in range(n_chunk):
        w = list(ref[c * a.ctx:(c + 1) * a.ctx])
        w[0] = bos
        llm.reset()
        llm.eval(w)
        s, k = nll_window(np.asarray(llm.scores[:a.ctx]), w, a.ctx // 2)
        nll, cnt = nll + s, cnt + k
    ppl_ref = math.exp(nll / cnt) if cnt else float("nan")
    t_ref = time.time() - t0
    t0 = time.time()
    out = "PPL = nan" if not n_chunk else subprocess.run([a.triforce, "perplexity", "-m", a.model, "-f", tfile, "-c", str(a.ctx), "-t",
                          str(a.threads)], capture_output=True, text=True, check=True).stdout
    t_ours = time.time() - t0
    if n_chunk:
        ppl_ours = float(out.strip().splitlines()[-1].split("=")[1])
        rel = abs(ppl_ours - ppl_ref) / ppl_ref
        res["perplexity"] = {"windows": n_chunk, "llamacpp": ppl_ref, "triforce": ppl_ours, "rel_diff": rel,
                             "seconds_llamacpp": t_ref, "seconds_triforce": t_ours}
        print(f"perplexity: {n_chunk} windows of {a.ctx}: llama.cpp {ppl_ref:.4f}, triforce {ppl_ours:.4f}, "
              f"relative difference {rel:.2e} ({'ok' if rel <= a.ppl_rtol else 'OVER'} {a.ppl_rtol:g})")
        ok &= rel <= a.ppl_rtol
    del llm

    # 3. greedy continuation of a long prompt
    long_text = raw.decode("utf-8", errors="ignore")
    if "greedy" not in checks:
        res["ok"] = bool(ok)
        print(json.dumps(res))
        return 0 if ok else 1
    # logits_all: every row of the last eval stays readable at its position
    llm = Llama(model_path=a.model, n_ctx=a.prompt_tokens + a.n + 8, n_batch=512, n_threads=a.threads,
                logits_all=True, verbose=False)
    toks = llm.tokenize(long_text[:a.prompt_tokens * 8].encode(), add_bos=True, special=False)[:a.prompt_tokens]
    prompt_text = llm.detokenize(toks[1:]).decode("utf-8", errors="ignore")
    # re-tokenize the cut text so both engines start from the same ids
    toks = llm.tokenize(prompt_text.encode(), add_bos=True, special=False)
    pfile = os.path.join(tmp, "prompt.txt")
    with open(pfile, "w", encoding="utf-8", newline="") as f:
        f.write(prompt_text)
    t0 = time.time()
    llm.eval(toks)
    gen = []
    for _ in range(a.n):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        gen.append(t)
        llm.eval([t])
    t_ref = time.time() - t0
    ref_text = llm.detokenize(gen).decode("utf-8", errors="replace")
    t0 = time.time()
    out = subprocess.run([a.triforce, "generate", "-m", a.model, "-f", pfile, "--temp", "0", "-n", str(a.n),
                          "--ignore-eos", "-t", str(a.threads)], capture_output=True, check=True)
    t_ours = time.time() - t0
    # bytes, not text mode: text mode would turn the novel's \r\n into \n
    ours_text = out.stdout.decode("utf-8", errors="replace")[len(prompt_text):]
    if ours_text.endswith("\n"):  # generate ends its output with one line break of its own
        ours_text = ours_text[:-1]
    same = ours_text == ref_text
    res["greedy"] = {"prompt_tokens": len(toks), "n": a.n, "identical": same, "llamacpp": ref_text,
                     "triforce": ours_text, "seconds_llamacpp": t_ref, "seconds_triforce": t_ours}
    print(f"greedy: {len(toks)}-token prompt, {a.n} tokens: {'identical' if same else 'DIFFERENT'}")
    if not same:
        # where the texts part: the first of llama.cpp's tokens whose text is no longer a prefix of
        # ours, and llama.cpp's own logit margin there between its token and the one ours continues with
        k, pre = 0, ""
        while k < len(gen):
            nxt = llm.detokenize(gen[:k + 1]).decode("utf-8", errors="replace")
            if not ours_text.startswith(nxt):
                break
            pre, k = nxt, k + 1
        if k < len(gen) and len(pre) < len(ours_text):
            row = np.asarray(llm.scores[len(toks) + k - 1], dtype=np.float64)
            alt = llm.tokenize(ours_text[len(pre):].encode(), add_bos=False, special=False)[0]
            margin = float(row[gen[k]] - row[alt])
            top = np.sort(row)[::-1]
            res["greedy"].update({"first_diff_token": k, "llamacpp_margin": margin,
                                  "llamacpp_top2_gap": float(top[0] - top[1])})
            print(f"  the texts part at generated token {k}: llama.cpp's logit of its token exceeds that of "
                  f"triforce's by {margin:.4f} (logit spread {row.std():.2f})")
        print(f"  llama.cpp: {ref_text!r}\n  triforce:  {ours_text!r}")
    ok &= same
    res["ok"] = bool(ok)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "greedy"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
