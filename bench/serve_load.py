#!/usr/bin/env python3
"""serve_load.py — load and time-to-first-token figures for a running `triforce serve`.

It starts nothing: point it at a server that is already listening (bench/serve.sh
starts one per figure). Python 3 standard library only (threads + http.client).

  load   N clients, each sending M short completion requests one after another over
         its own keep-alive connection (all clients start together). Prints requests/s
         over the wall time of the whole run, and latency percentiles (p50, p99;
         nearest rank) of the individual requests, each measured from sending the
         request to reading the whole response.

  ttft   a long document (the first ~K tokens of a text file, counted with the
         server's /tokenize) as one chat message, followed by a question; then the
         same document with a second question. Both streamed; TTFT is the time from
         sending the request to the first server-sent event that carries generated
         text (the role-only first chunk does not count). The first question pays
         the whole prefill; the second can reuse the slot's cache for the shared
         document prefix (usage.prompt_tokens_details.cached_tokens says how much).
         --runs R repeats this on R different slices of the text, so that each
         first question starts from a cache that does not hold its document.

Every result line also goes to -o FILE (appended, after a header naming the date,
the client machine, the server's model and its slots).

  python3 bench/serve_load.py --url http://127.0.0.1:8080 load -c 4 -n 25 --max-tokens 16
  python3 bench/serve_load.py --url http://127.0.0.1:8080 ttft \\
      --doc ../shared/text/pride_and_prejudice.txt --doc-tokens 7500
"""
import argparse
import http.client
import json
import math
import os
import platform
import sys
import threading
import time
import urllib.parse

MAX_CLIENTS = 64
MAX_REQUESTS = 10000  # per client


class Server:
    """Where the server is and how to talk to it (one connection per caller)."""

    def __init__(self, url, api_key, timeout):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            sys.exit(f"serve_load: --url {url!r}: expected http://HOST:PORT")
        self.host, self.port = u.hostname, u.port or 80
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    def connect(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get_json(self, path, body=None):
        """GET (or POST when body is given) a JSON endpoint; exits with the error body on failure."""
        conn = self.connect()
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request("POST" if data else "GET", path, body=data, headers=self.headers)
            r = conn.getresponse()
            text = r.read().decode("utf-8", "replace")
            if r.status != 200:
                sys.exit(f"serve_load: {path}: HTTP {r.status}: {text[:300]}")
            return json.loads(text)
        except OSError as e:
            sys.exit(f"serve_load: cannot reach http://{self.host}:{self.port}{path}: {e}")
        finally:
            conn.close()

    def describe(self):
        models = self.get_json("/v1/models")
        health = self.get_json("/health")
        m = models["data"][0]
        slots = health.get("slots_idle", 0) + health.get("slots_busy", 0)
        return f"model {m['id']}, context {m.get('context_length', '?')}, {slots} slots"


def percentile(sorted_xs, p):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_xs:
        return float("nan")
    k = max(1, math.ceil(p / 100.0 * len(sorted_xs)))
    return sorted_xs[k - 1]


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/loadavg") as f:
            load = " (load average " + " ".join(f.read().split()[:3]) + ")"
    except OSError:
        load = ""
    return f"{model}, {os.cpu_count()} CPUs{load}"


class Output:
    """Result lines to stdout and, with -o, appended to a file after a header."""

    def __init__(self, path, header):
        self.f = open(path, "a") if path else None
        if self.f:
            self.f.write(header + "\n")
            self.f.flush()

    def line(self, s):
        print(s, flush=True)
        if self.f:
            self.f.write(s + "\n")
            self.f.flush()

    def close(self):
        if self.f:
            self.f.close()


# ---- load ----

def load_client(srv, idx, n, body_base, start, results, lock):
    conn = srv.connect()
    mine = []
    start.wait()
    for i in range(n):
        body = dict(body_base)
        body["seed"] = idx * MAX_REQUESTS + i  # reproducible, different per request
        data = json.dumps(body).encode()
        t0 = time.perf_counter()
        status, tokens, err = 0, 0, None
        try:
            conn.request("POST", "/v1/completions", body=data, headers=srv.headers)
            r = conn.getresponse()
            text = r.read()
            status = r.status
            if status == 200:
                tokens = json.loads(text)["usage"]["completion_tokens"]
            else:
                err = text[:200].decode("utf-8", "replace")
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            err = repr(e)
            conn.close()
            conn = srv.connect()
        mine.append((time.perf_counter() - t0, status, tokens, err))
    conn.close()
    with lock:
        results.extend(mine)


def run_load(srv, args, out):
    if not 1 <= args.clients <= MAX_CLIENTS or not 1 <= args.requests <= MAX_REQUESTS:
        sys.exit(f"serve_load: expected 1..{MAX_CLIENTS} clients and 1..{MAX_REQUESTS} requests per client")
    body = {"prompt": args.prompt, "max_tokens": args.max_tokens}
    if args.temperature is not None:
        body["temperature"] = args.temperature
    # one request first, untimed: the server's first allocation and page faults
    c = srv.connect()
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, seed=0)).encode(), headers=srv.headers)
    c.getresponse().read()
    c.close()
    start = threading.Barrier(args.clients + 1)
    lock = threading.Lock()
    results = []
    threads = [threading.Thread(target=load_client, args=(srv, k, args.requests, body, start, results, lock))
               for k in range(args.clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = sorted(r[0] for r in results if r[1] == 200)
    busy = sum(1 for r in results if r[1] == 503)
    failed = len(results) - len(ok) - busy
    toks = sum(r[2] for r in results)
    errs = [r[3] for r in results if r[3]]
    label = f" [{args.label}]" if args.label else ""
    out.line(f"load{label}: {args.clients} clients x {args.requests} requests, max_tokens {args.max_tokens}: "
             f"{len(ok)} ok, {busy} busy (503), {failed} failed in {wall:.2f} s: "
             f"{len(ok) / wall:.1f} req/s, latency p50 {percentile(ok, 50) * 1e3:.1f} ms, "
             f"p99 {percentile(ok, 99) * 1e3:.1f} ms (min {ok[0] * 1e3 if ok else float('nan'):.1f}, "
             f"max {ok[-1] * 1e3 if ok else float('nan'):.1f}), {toks / wall:.0f} generated tokens/s")
    if errs:
        out.line(f"load{label}: first error: {errs[0]}")
    return 0 if not failed else 1


# ---- ttft ----

def count_tokens(srv, text):
    return len(srv.get_json("/tokenize", {"content": text, "add_special": False})["tokens"])


def doc_slice(srv, text, start, want):
    """The longest text[start:start+n] (n found by bisection) of at most `want` tokens."""
    lo, hi = 0, min(len(text) - start, want * 8)
    if count_tokens(srv, text[start:start + hi]) <= want:
        return text[start:start + hi]
    while hi - lo > 16:
        mid = (lo + hi) // 2
        if count_tokens(srv, text[start:start + mid]) <= want:
            lo = mid
        else:
            hi = mid
    return text[start:start + lo]


def stream_chat(srv, content, max_tokens):
    """One streamed chat request: (ttft_s, total_s, text, usage)."""
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    conn = srv.connect()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=srv.headers)
    r = conn.getresponse()
    if r.status != 200:
        sys.exit(f"serve_load: chat: HTTP {r.status}: {r.read()[:300]!r}")
    ttft, text, usage = None, [], None
    while True:
        line = r.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if not line.startswith(b"data: "):
            continue  # blank separators and ": keep-alive" comments
        data = line[6:]
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if "error" in ev:
            sys.exit(f"serve_load: chat: error event: {ev['error']}")
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(piece)
    total = time.perf_counter() - t0
    conn.close()
    return ttft if ttft is not None else float("nan"), total, "".join(text), usage or {}


def run_ttft(srv, args, out):
    with open(args.doc, encoding="utf-8", errors="replace") as f:
        text = f.read()
    name = os.path.basename(args.doc)
    worst = 0
    for run in range(args.runs):
        start = args.offset + run * args.stride
        if start >= len(text):
            sys.exit(f"serve_load: {args.doc} has no text at character {start} (lower --runs or --stride)")
        doc = doc_slice(srv, text, start, args.doc_tokens)
        n_doc = count_tokens(srv, doc)
        res = []
        for q in (args.q1, args.q2):
            content = f"{doc}\n\nAbout the text above: {q}"
            res.append(stream_chat(srv, content, args.max_tokens))
        (t1, _, a1, u1), (t2, _, a2, u2) = res
        c1 = u1.get("prompt_tokens_details", {}).get("cached_tokens", "?")
        c2 = u2.get("prompt_tokens_details", {}).get("cached_tokens", "?")
        out.line(f"ttft [{name} from character {start}, document {n_doc} tokens]: question 1 "
                 f"({u1.get('prompt_tokens', '?')} prompt tokens, {c1} cached) TTFT {t1:.3f} s; question 2 "
                 f"({u2.get('prompt_tokens', '?')} prompt tokens, {c2} cached) TTFT {t2:.3f} s; "
                 f"ratio {t1 / t2:.1f}x")
        if args.verbose:
            out.line(f"  answer 1: {a1!r}\n  answer 2: {a2!r}")
        worst = max(worst, 0 if isinstance(c2, int) and c2 > 0 else 1)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="the server (default %(default)s)")
    ap.add_argument("--api-key", default=os.environ.get("TRIFORCE_API_KEY"),
                    help="sent as Authorization: Bearer KEY (default: $TRIFORCE_API_KEY)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request before giving up (default 600)")
    ap.add_argument("-o", "--output", help="append the header and result lines to this file")
    sub = ap.add_subparsers(dest="mode", required=True)
    lp = sub.add_parser("load", help="N concurrent clients x M short completions")
    lp.add_argument("-c", "--clients", type=int, default=4, help="concurrent clients (default 4)")
    lp.add_argument("-n", "--requests", type=int, default=25, help="requests per client (default 25)")
    lp.add_argument("--max-tokens", type=int, default=16, help="max_tokens of each request (default 16)")
    lp.add_argument("--prompt", default="Once upon a time", help="the prompt (default %(default)r)")
    lp.add_argument("--temperature", type=float, help="default: the server's (each request has its own seed)")
    lp.add_argument("--label", default="", help="a label for the result line (such as the server's flags)")
    tp = sub.add_parser("ttft", help="time to first token on a long document, two questions in sequence")
    tp.add_argument("--doc", required=True, help="a text file (such as ../shared/text/pride_and_prejudice.txt)")
    tp.add_argument("--doc-tokens", type=int, default=7500, help="tokens of the document to send (default 7500)")
    tp.add_argument("--offset", type=int, default=20000, help="character of the text where run 1 starts (default 20000)")
    tp.add_argument("--stride", type=int, default=40000, help="characters between runs' slices (default 40000)")
    tp.add_argument("--runs", type=int, default=2, help="runs, each on its own slice (default 2)")
    tp.add_argument("--max-tokens", type=int, default=16, help="max_tokens of each answer (default 16)")
    tp.add_argument("--q1", default="Who are the people named in it? Answer in one sentence.")
    tp.add_argument("--q2", default="Where does it take place? Answer in one sentence.")
    tp.add_argument("-v", "--verbose", action="store_true", help="print the answers too")
    args = ap.parse_args()
    if args.mode == "ttft" and not 1 <= args.runs <= 20:
        sys.exit("serve_load: --runs: expected 1..20")
    srv = Server(args.url, args.api_key, args.timeout)
    desc = srv.describe()
    header = (f"# serve_load.py {args.mode}, {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, "
              f"client {machine()}, server {args.url}: {desc}")
    out = Output(args.output, header)
    print(header, flush=True)
    try:
        rc = run_load(srv, args, out) if args.mode == "load" else run_ttft(srv, args, out)
    finally:
        out.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
