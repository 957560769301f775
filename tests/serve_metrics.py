#!/usr/bin/env python3
"""Reads `triforce serve`'s GET /metrics once the server is idle and checks that it adds up:
every accepted request ended as exactly one of completed, failed and cancelled; each
histogram's buckets are cumulative and end at its count; the request-duration and
decode-rate histograms count every completed request and the time-to-first-token one every
completed request that generated a token (all of them, in these tests); no request took less
time in all than to its first token. Used by tests/test_serve.sh and tests/serve_openai.py.

    tests/serve_metrics.py BASE_URL [NAME=VALUE ...]

NAME=VALUE: a metric (sample name as printed, e.g. triforce_requests_cancelled_total) that
must have that value. Prints the counts; exits 1 naming the first check that fails.
"""
import re
import sys
import time
import urllib.request

HISTOGRAMS = ("triforce_time_to_first_token_seconds", "triforce_request_duration_seconds",
              "triforce_request_decode_tokens_per_second")


def scrape(base):
    """{sample name with labels: value} of one GET /metrics."""
    text = urllib.request.urlopen(base.rstrip("/") + "/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def idle(base, timeout=20.0):
    """The metrics once no request is queued or running (a response can reach its client
    just before its slot counts it)."""
    end = time.time() + timeout
    while True:
        m = scrape(base)
        if (m["triforce_queue_length"] == 0 and m["triforce_slots_busy"] == 0) or time.time() > end:
            return m
        time.sleep(0.05)


def check(base, expect=None):
    m = idle(base)

    def need(ok, what):
        if not ok:
            raise AssertionError("metrics do not add up: %s\n%s" % (
                what, "\n".join("%s %g" % kv for kv in sorted(m.items()))))

    need(m["triforce_queue_length"] == 0 and m["triforce_slots_busy"] == 0, "the server did not become idle")
    done = m["triforce_requests_completed_total"]
    need(m["triforce_requests_total"] == done + m["triforce_requests_failed_total"] +
         m["triforce_requests_cancelled_total"],
         "requests_total != completed + failed + cancelled")
    for h in HISTOGRAMS:
        buckets = sorted(((float(re.search(r'le="([^"]+)"', k).group(1)), v) for k, v in m.items()
                          if k.startswith(h + "_bucket{")), key=lambda b: b[0])
        need(len(buckets) >= 2 and buckets[-1][0] == float("inf"), "%s has no +Inf bucket" % h)
        need(all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), "%s buckets are not cumulative" % h)
        need(buckets[-1][1] == m[h + "_count"], "%s: +Inf bucket != _count" % h)
        need(m[h + "_count"] == done, "%s_count %g != %g completed requests" % (h, m[h + "_count"], done))
        need(m[h + "_sum"] >= 0, "%s_sum is negative" % h)
    need(m["triforce_request_duration_seconds_sum"] >= m["triforce_time_to_first_token_seconds_sum"],
         "the requests took less time than to their first tokens")
    for name, value in (expect or {}).items():
        need(m.get(name) == value, "%s is %s, expected %g" % (name, m.get(name), value))
    return m


if __name__ == "__main__":
    expect = {k: float(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
    try:
        m = check(sys.argv[1], expect)
    except AssertionError as e:
        print(e)
        sys.exit(1)
    print("metrics add up: %d requests, %d completed, %d failed, %d cancelled" % (
        m["triforce_requests_total"], m["triforce_requests_completed_total"],
        m["triforce_requests_failed_total"], m["triforce_requests_cancelled_total"]))
