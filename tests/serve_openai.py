#!/usr/bin/env python3
"""The official openai client against `triforce serve` (started by tests/test_serve.sh on
stories260K with --draft-layers 2): completions and chat-shaped errors, streamed and whole,
greedy output equal to `triforce generate`'s; then 8 clients x 20 requests of mixed lengths
and modes, every response complete and equal to the same request made alone, and the
metrics adding up (tests/serve_metrics.py): 160 more completed requests, each observed by the
time-to-first-token, request-duration and decode-rate histograms.

    tests/serve_openai.py BASE_URL GENERATE_OUTPUT_FILE
"""
import concurrent.futures
import sys

import openai

import serve_metrics

base, gen_file = sys.argv[1], sys.argv[2]
expected = open(gen_file).read()
client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
P = "Once upon a time"

r = client.completions.create(model="stories260K", prompt=P, max_tokens=24, temperature=0)
assert r.choices[0].text == expected, (r.choices[0].text, expected)
assert r.usage.completion_tokens == 24 and r.usage.prompt_tokens == 5, r.usage
assert r.choices[0].finish_reason == "length"

text = "".join(c.choices[0].text for c in client.completions.create(
    model="stories260K", prompt=P, max_tokens=24, temperature=0, stream=True))
assert text == expected, (text, expected)

try:
    client.chat.completions.create(model="stories260K", messages=[{"role": "user", "content": "hi"}])
    raise AssertionError("chat on a model without a template was accepted")
except openai.BadRequestError as e:
    assert "no chat template" in str(e), e

try:
    client.completions.create(model="stories260K", prompt=P, n=2)
    raise AssertionError("n=2 was accepted")
except openai.BadRequestError as e:
    assert "'n' must be 1" in str(e), e

models = client.models.list()
assert [m.id for m in models.data] == ["stories260K.gguf"], models


# concurrency: every request once alone, then 8 clients x 20 at once
prompts = ["Once upon a time", "The cat", "Lily and Tom went to the park. They", "One day, a little bird"]
modes = ["ar", "retrieval", "triforce", "draft"]
cases = [(prompts[i % 4], 4 + (i * 7) % 29, modes[(i // 4) % 4]) for i in range(16)]


def run(case):
    p, n, mode = case
    r = client.completions.create(model="x", prompt=p, max_tokens=n, temperature=0,
                                  extra_body={"triforce": {"mode": mode}})
    return r.choices[0].text, r.usage.completion_tokens, r.choices[0].finish_reason


alone = {c: run(c) for c in cases}
root = base[:-len("/v1")] if base.endswith("/v1") else base
m0 = serve_metrics.check(root)
jobs = [cases[(k * 5 + j) % len(cases)] for k in range(8) for j in range(20)]
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    results = list(ex.map(run, jobs))
for c, got in zip(jobs, results):
    assert got == alone[c], (c, got, alone[c])
m1 = serve_metrics.check(root)


def grew(name):
    return m1[name] - m0[name]


assert grew("triforce_requests_total") == len(jobs)
assert grew("triforce_requests_completed_total") == len(jobs)
assert grew("triforce_requests_failed_total") == 0 and grew("triforce_requests_cancelled_total") == 0
for h in serve_metrics.HISTOGRAMS:
    assert grew(h + "_count") == len(jobs), (h, grew(h + "_count"))
    assert grew(h + "_sum") > 0, h
assert grew("triforce_generated_tokens_total") == sum(r[1] for r in results)
print("openai client: ok; %d concurrent requests equal to the same requests alone" % len(jobs))
