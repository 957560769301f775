#!/bin/sh
# test_serve.sh — `triforce serve` end to end on loopback, with curl and (where
# `make test-deps` installed it) the official openai Python client:
#   - completions greedy and seeded-sampled equal `triforce generate`'s output,
#     streamed and whole, in ar and triforce mode; chat equals `generate --chat`
#     (SmolLM2, when fetched); usage counts; a second request on the same
#     prompt reuses the slot's cache;
#   - bad input: malformed JSON (line and column), wrong types and ranges naming
#     the field, unsupported fields, a prompt past the context, a body over the
#     limit (413), unknown paths (404), wrong methods (405), the API key (401);
#   - a stalled client is cut off after --timeout; a full queue answers 503 with
#     Retry-After; a client that leaves mid-stream
#     cancels its request and the server keeps serving; SIGTERM while streaming
#     ends the stream with an error event and the process exits 0; every server
#     exits 0 on SIGTERM and its log holds no sanitizer report (`make asan`);
#   - /metrics adds up (tests/serve_metrics.py): requests completed, failed and cancelled
#     make the total; the time-to-first-token, request-duration and decode-rate
#     histograms count the completed requests, a cancelled one in none of them;
#   - tests/serve_openai.py: the openai client, and 8 clients x 20 requests;
#   - schemathesis: requests generated from docs/openapi.json never get a 5xx.
# Needs stories260K from ../shared (skips otherwise). Reports with cmocka's markers.
B=${BUILD:-build}
TF=$B/triforce
W=$B/test_serve
. tests/common/marks.sh

[ -x "$TF" ] || { echo "test_serve: $TF not built"; exit 1; }
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
SMOL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PY=.venv-test/bin/python
if [ ! -f "$S260" ] || ! command -v curl > /dev/null; then
    skipped serve "$S260 or curl not found"
    marks_summary
fi
rm -rf "$W"; mkdir -p "$W" || exit 1
PIDS=""
LOGS=""

# start NAME ARGS...: a server on a free port; sets PORT and PID
start() {
    name=$1; shift
    "$TF" serve --port 0 "$@" 2> "$W/$name.log" &
    PID=$!
    PIDS="$PIDS $PID"
    LOGS="$LOGS $W/$name.log"
    i=0
    while [ $i -lt 100 ]; do
        PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$W/$name.log")
        [ -n "$PORT" ] && return 0
        kill -0 $PID 2> /dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    echo "server $name did not start:"; cat "$W/$name.log"; return 1
}
cleanup() { for p in $PIDS; do kill $p 2> /dev/null; done; }
trap cleanup EXIT
# stop NAME: SIGTERM to the server started last; its exit status goes to $W/exits
# (servers_exit_cleanly checks them all, and the logs, at the end)
stop() { kill "$PID"; wait "$PID" 2> /dev/null; echo "$? $1" >> "$W/exits"; }

# post PATH BODY: response body in $W/body, status in $W/status
post() {
    curl -s -o "$W/body" -w '%{http_code}' -H 'Content-Type: application/json' $HDR \
        --data-binary "$2" "http://127.0.0.1:$PORT$1" > "$W/status"
}
# expect_status NAME STATUS PATTERN PATH BODY
expect_status() {
    echo "[ RUN      ] $1"
    post "$4" "$5"
    if [ "$(cat "$W/status")" = "$2" ] && grep -qF -- "$3" "$W/body"; then ok "$1"
    else echo "status $(cat "$W/status"), body: $(head -c 600 "$W/body")"; bad "$1"; fi
}
# json_field EXPR < file: a value of the response (python3 is part of Debian's base)
json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

start main -m "$S260" --draft-layers 2 --mode ar -c 2048 --parallel 2 -b 16 || { bad serve_start; marks_summary; }

echo "[ RUN      ] health"
if [ "$(curl -s "http://127.0.0.1:$PORT/health" | json_field "d['status']")" = ok ]; then ok health; else bad health; fi

P="Once upon a time"
"$TF" generate -m "$S260" -p "$P" -n 24 --temp 0 -b 16 2> /dev/null | sed "s/^$P//" | tr -d '\n' > "$W/gen_greedy"
"$TF" generate -m "$S260" -p "$P" -n 24 --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 -s 1234 -b 16 2> /dev/null |
    sed "s/^$P//" | tr -d '\n' > "$W/gen_sampled"

echo "[ RUN      ] completion_equals_generate"
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0}"
json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
if cmp -s "$W/srv" "$W/gen_greedy" && [ "$(json_field "d['usage']['completion_tokens']" < "$W/body")" = 24 ] &&
    [ "$(json_field "d['usage']['prompt_tokens']" < "$W/body")" = 5 ]; then ok completion_equals_generate
else echo "server: [$(cat "$W/srv")] generate: [$(cat "$W/gen_greedy")]"; cat "$W/body"; bad completion_equals_generate; fi

echo "[ RUN      ] sampled_equals_generate"
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"seed\": 1234}"
json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
if cmp -s "$W/srv" "$W/gen_sampled"; then ok sampled_equals_generate
else echo "server: [$(cat "$W/srv")] generate: [$(cat "$W/gen_sampled")]"; bad sampled_equals_generate; fi

echo "[ RUN      ] triforce_mode_equals_generate"
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0, \"triforce\": {\"mode\": \"triforce\", \"gamma2\": 4}}"
json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
if cmp -s "$W/srv" "$W/gen_greedy"; then ok triforce_mode_equals_generate
else echo "server: [$(cat "$W/srv")]"; cat "$W/body"; bad triforce_mode_equals_generate; fi

echo "[ RUN      ] sampled_triforce_equals_generate"
# sampled, the keyed coupling (the default): the triforce mode's text is ar's for the seed, even with gamma2 0
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"seed\": 1234, \"triforce\": {\"mode\": \"triforce\", \"gamma2\": 0, \"coupling\": \"keyed\"}}"
json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
if cmp -s "$W/srv" "$W/gen_sampled"; then ok sampled_triforce_equals_generate
else echo "server: [$(cat "$W/srv")] generate: [$(cat "$W/gen_sampled")]"; cat "$W/body"; bad sampled_triforce_equals_generate; fi

echo "[ RUN      ] middle_skipped_equals_generate"
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0, \"triforce\": {\"mode\": \"triforce\", \"middle\": \"never\"}}"
json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
if cmp -s "$W/srv" "$W/gen_greedy"; then ok middle_skipped_equals_generate
else echo "server: [$(cat "$W/srv")]"; cat "$W/body"; bad middle_skipped_equals_generate; fi

echo "[ RUN      ] stream_equals_whole"
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" \
    -d "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
    > "$W/sse"
python3 - "$W/sse" > "$W/srv" << 'EOF'
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1]
chunks = [json.loads(e) for e in events[:-1]]
assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 24, chunks[-1]
assert chunks[-2]["choices"][0]["finish_reason"] == "length", chunks[-2]
sys.stdout.write("".join(c["choices"][0]["text"] for c in chunks[:-1]))
EOF
if [ $? -eq 0 ] && cmp -s "$W/srv" "$W/gen_greedy"; then ok stream_equals_whole
else echo "stream: [$(cat "$W/srv")]"; head -c 800 "$W/sse"; bad stream_equals_whole; fi

echo "[ RUN      ] prompt_cache_reuse"
# whole prefill batches (-b 16) of a prompt a slot prefilled are reused: 32 positions
P2="Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her friends and her dog"
post /v1/completions "{\"prompt\": \"$P2\", \"max_tokens\": 2, \"temperature\": 0}"
post /v1/completions "{\"prompt\": \"$P2. One day\", \"max_tokens\": 4, \"temperature\": 0}"
reused=$(json_field "d['usage']['prompt_tokens_details']['cached_tokens']" < "$W/body")
if [ "$reused" = 32 ]; then ok prompt_cache_reuse; else cat "$W/body"; bad prompt_cache_reuse; fi

echo "[ RUN      ] stop_string"
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0, \"stop\": [\"little\"]}"
text=$(json_field "d['choices'][0]['text']" < "$W/body")
fin=$(json_field "d['choices'][0]['finish_reason']" < "$W/body")
want=$(sed 's/little.*//' "$W/gen_greedy")
if [ "$text" = "$want" ] && [ "$fin" = stop ]; then ok stop_string; else echo "[$text] [$want] $fin"; bad stop_string; fi

expect_status chat_without_template 400 "no chat template" /v1/chat/completions \
    '{"messages": [{"role": "user", "content": "hi"}]}'
expect_status malformed_json 400 "line 1, column" /v1/completions '{"prompt": "x",}'
expect_status wrong_type 400 "'max_tokens' is a string" /v1/completions '{"prompt": "x", "max_tokens": "9"}'
expect_status out_of_range 400 "'temperature' is 3" /v1/completions '{"prompt": "x", "temperature": 3}'
expect_status n_above_one 400 "'n' must be 1" /v1/completions '{"prompt": "x", "n": 2}'
expect_status logprobs_refused 400 "'logprobs' is not supported" /v1/completions '{"prompt": "x", "logprobs": 3}'
expect_status penalty_refused 400 "'presence_penalty' is not supported" /v1/completions '{"prompt": "x", "presence_penalty": 0.5}'
expect_status bad_mode 400 "'triforce.mode'" /v1/completions '{"prompt": "x", "triforce": {"mode": "fast"}}'
expect_status bad_middle 400 "'triforce.middle' is not one of always, auto, never" /v1/completions '{"prompt": "x", "triforce": {"middle": "maybe"}}'
expect_status bad_coupling 400 "'triforce.coupling' is not one of keyed, residual" /v1/completions '{"prompt": "x", "triforce": {"coupling": "max"}}'
expect_status bad_token 400 "token ids 0..511" /v1/completions '{"prompt": [1, 99999]}'
long=$(python3 -c "print('once upon a time ' * 800)")
expect_status prompt_past_context 400 "the server's context is 2048" /v1/completions "{\"prompt\": \"$long\"}"
expect_status unknown_path 404 "no such path: /v2/nothing" /v2/nothing '{}'
echo "[ RUN      ] wrong_method"
code=$(curl -s -o "$W/body" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions")
if [ "$code" = 405 ] && grep -q "expected POST" "$W/body"; then ok wrong_method; else echo "$code"; bad wrong_method; fi
echo "[ RUN      ] body_too_large"
head -c 9000000 /dev/zero | tr '\0' ' ' > "$W/big"
code=$(curl -s -o "$W/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$W/big" \
    "http://127.0.0.1:$PORT/v1/completions")
if [ "$code" = 413 ]; then ok body_too_large; else echo "$code $(cat "$W/body")"; bad body_too_large; fi
expect_status tokenize 200 '"tokens":[1,' /tokenize "{\"content\": \"$P\", \"add_special\": true}"
expect_status detokenize 200 "Once upon a time\"}" /detokenize "$(cat "$W/body" | python3 -c "import json,sys; print(json.dumps({'tokens': json.load(sys.stdin)['tokens'][1:]}))")"

echo "[ RUN      ] metrics_add_up"
# two more completed requests (one streamed); a refused one is not accepted, so not counted
before=$(python3 tests/serve_metrics.py "http://127.0.0.1:$PORT" | sed -n 's/.* \([0-9]*\) completed.*/\1/p')
post /v1/completions '{"prompt": "The cat", "max_tokens": 3, "temperature": 0}'
post /v1/completions '{"prompt": "The cat", "temperature": 3}'
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt": "The dog", "max_tokens": 5, "temperature": 0, "stream": true}' > /dev/null
if [ -n "$before" ] && python3 tests/serve_metrics.py "http://127.0.0.1:$PORT" \
    triforce_requests_completed_total=$((before + 2)) triforce_requests_failed_total=0 \
    triforce_requests_cancelled_total=0 > "$W/metrics.log"; then ok metrics_add_up
else echo "completed before: [$before]"; cat "$W/metrics.log"; bad metrics_add_up; fi

if [ -x "$PY" ] && "$PY" -c "import openai" 2> /dev/null; then
    echo "[ RUN      ] openai_client"
    if "$PY" tests/serve_openai.py "http://127.0.0.1:$PORT/v1" "$W/gen_greedy" > "$W/py.log" 2>&1; then ok openai_client
    else cat "$W/py.log"; bad openai_client; fi
else
    skipped openai_client "the openai client is not installed in .venv-test (make test-deps)"
fi
# schemathesis: cases generated from docs/openapi.json, none may get a 5xx or crash the server
if [ -x .venv-test/bin/schemathesis ] && [ -f docs/openapi.json ]; then
    echo "[ RUN      ] schemathesis"
    (cd "$W" && "$OLDPWD/.venv-test/bin/schemathesis" run "$OLDPWD/docs/openapi.json" -u "http://127.0.0.1:$PORT" \
        --max-examples 15 --seed 1 -c not_a_server_error > st.log 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(curl -s "http://127.0.0.1:$PORT/health" | json_field "d['status']")" = ok ]; then
        ok schemathesis
    else tail -40 "$W/st.log"; bad schemathesis; fi
else
    skipped schemathesis "schemathesis is not installed in .venv-test (make test-deps)"
fi
stop main

# a server that drafts by text lookup: its default (triforce) and draft modes (also by the
# draft mode's former name, spec) give generate's text
start lookup -m "$S260" --draft-lookup 2 -c 2048 -b 16 || bad serve_start_lookup
for m in triforce draft spec; do
    echo "[ RUN      ] lookup_${m}_equals_generate"
    post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 24, \"temperature\": 0, \"triforce\": {\"mode\": \"$m\"}}"
    json_field "d['choices'][0]['text']" < "$W/body" | tr -d '\n' > "$W/srv"
    if cmp -s "$W/srv" "$W/gen_greedy"; then ok "lookup_${m}_equals_generate"
    else echo "server: [$(cat "$W/srv")]"; cat "$W/body"; bad "lookup_${m}_equals_generate"; fi
done
stop lookup

# a client that leaves mid-stream: a context long enough that the generation outlasts it
start long -m "$S260" -c 65536 || bad serve_start_long
echo "[ RUN      ] disconnect_cancels"
curl -sN --max-time 0.3 -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt": "Once", "max_tokens": 100000, "temperature": 0, "stream": true, "triforce": {"mode": "ar"}}' > /dev/null 2>&1
i=0  # the worker counts the cancel when it has stopped (within a decoding step)
while [ $i -lt 50 ]; do
    cancelled=$(curl -s "http://127.0.0.1:$PORT/metrics" | sed -n 's/^triforce_requests_cancelled_total //p')
    [ "$cancelled" -ge 1 ] 2> /dev/null && break
    sleep 0.1; i=$((i + 1))
done
post /v1/completions "{\"prompt\": \"$P\", \"max_tokens\": 4, \"temperature\": 0}"
if [ "$cancelled" -ge 1 ] 2> /dev/null && [ "$(cat "$W/status")" = 200 ]; then ok disconnect_cancels
else echo "cancelled=$cancelled status=$(cat "$W/status")"; bad disconnect_cancels; fi
echo "[ RUN      ] metrics_count_the_cancelled"
# the cancelled request is counted once, and not in the histograms of completed requests
if python3 tests/serve_metrics.py "http://127.0.0.1:$PORT" triforce_requests_total=2 \
    triforce_requests_cancelled_total=1 triforce_requests_completed_total=1 > "$W/metrics.log"
then ok metrics_count_the_cancelled; else cat "$W/metrics.log"; bad metrics_count_the_cancelled; fi

stop long

# the API key
start key -m "$S260" -c 256 --api-key s3cret --chat-template chatml --timeout 1 || bad serve_start_key
echo "[ RUN      ] stalled_client_timeout"
if python3 - "$PORT" << 'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
s.settimeout(5)
t = time.time()
try:
    data = s.recv(4096)
except OSError:
    data = b""
sys.exit(0 if 0.5 < time.time() - t < 4.5 and not data.startswith(b"HTTP/1.1 200") else 1)
EOF
then ok stalled_client_timeout; else bad stalled_client_timeout; fi
HDR=
expect_status api_key_missing 401 "missing or wrong API key" /v1/completions '{"prompt": "x", "max_tokens": 1}'
HDR="-H Authorization:Bearer_s3cre"
expect_status api_key_wrong 401 "missing or wrong API key" /v1/completions '{"prompt": "x", "max_tokens": 1}'
echo "[ RUN      ] api_key_right"
code=$(curl -s -o "$W/body" -w '%{http_code}' -H 'Authorization: Bearer s3cret' -d '{"prompt": "x", "max_tokens": 1}' \
    "http://127.0.0.1:$PORT/v1/completions")
if [ "$code" = 200 ]; then ok api_key_right; else echo "$code $(cat "$W/body")"; bad api_key_right; fi
echo "[ RUN      ] chat_template_by_name"
code=$(curl -s -o "$W/body" -w '%{http_code}' -H 'Authorization: Bearer s3cret' \
    -d '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Tell a story"}], "max_tokens": 3, "temperature": 0}' \
    "http://127.0.0.1:$PORT/v1/chat/completions")
if [ "$code" = 200 ] && [ "$(json_field "d['usage']['completion_tokens']" < "$W/body")" -ge 1 ]; then ok chat_template_by_name
else echo "$code $(cat "$W/body")"; bad chat_template_by_name; fi
HDR=
echo "[ RUN      ] health_without_key"
if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ]; then ok health_without_key
else bad health_without_key; fi
stop key

# one slot, no queue: a second request while the first decodes gets 503; SIGTERM mid-stream
start busy -m "$S260" -c 2048 --parallel 1 --queue 0 || bad serve_start_busy
curl -sN -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt": "Once", "max_tokens": 2000, "temperature": 0, "stream": true}' > "$W/long_sse" 2>&1 &
CURL=$!
i=0; while [ ! -s "$W/long_sse" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
echo "[ RUN      ] queue_full_503"
code=$(curl -s -D "$W/headers" -o "$W/body" -w '%{http_code}' -d '{"prompt": "x", "max_tokens": 1}' \
    "http://127.0.0.1:$PORT/v1/completions")
if [ "$code" = 503 ] && grep -qi '^Retry-After: 1' "$W/headers"; then ok queue_full_503
else echo "$code"; cat "$W/headers" "$W/body"; bad queue_full_503; fi
echo "[ RUN      ] sigterm_while_streaming"
kill -TERM $PID; wait $PID; rc=$?
echo "$rc busy" >> "$W/exits"
wait $CURL
if [ $rc -eq 0 ] && grep -q '"server is shutting down\|shutting down' "$W/long_sse" && tail -c 20 "$W/long_sse" | grep -q '\[DONE\]'
then ok sigterm_while_streaming
else echo "exit $rc"; tail -c 400 "$W/long_sse"; tail -3 "$W/busy.log"; bad sigterm_while_streaming; fi

if [ -f "$SMOL" ]; then
    start smol -m "$SMOL" -c 1024 || bad serve_start_smol
    Q="What is the capital of France?"
    "$TF" generate -m "$SMOL" --chat -p "$Q" -n 16 --temp 0 2> /dev/null > "$W/gen_chat"
    echo "[ RUN      ] chat_equals_generate"
    post /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"$Q\"}], \"max_tokens\": 16, \"temperature\": 0}"
    json_field "d['choices'][0]['message']['content']" < "$W/body" > "$W/srv"
    if python3 -c "import sys; g=open(sys.argv[1]).read().rstrip('\n'); s=open(sys.argv[2]).read().rstrip('\n'); sys.exit(not (s and g.endswith(s)))" "$W/gen_chat" "$W/srv"
    then ok chat_equals_generate
    else echo "server: [$(cat "$W/srv")]"; echo "generate: [$(cat "$W/gen_chat")]"; bad chat_equals_generate; fi
    echo "[ RUN      ] stop_string_and_end_of_generation"
    M2="{\"role\": \"user\", \"content\": \"What is the capital of France? Answer in one sentence.\"}"
    post /v1/chat/completions "{\"messages\": [$M2], \"max_tokens\": 32, \"temperature\": 0}"
    json_field "d['choices'][0]['message']['content'], d['choices'][0]['finish_reason']" < "$W/body" > "$W/plain"
    post /v1/chat/completions "{\"messages\": [$M2], \"max_tokens\": 32, \"temperature\": 0, \"stop\": [\"QQQQQQQQQQ\"]}"
    json_field "d['choices'][0]['message']['content'], d['choices'][0]['finish_reason']" < "$W/body" > "$W/stopped"
    if cmp -s "$W/plain" "$W/stopped" && grep -q 'stop$' "$W/plain"; then ok stop_string_and_end_of_generation
    else cat "$W/plain" "$W/stopped"; bad stop_string_and_end_of_generation; fi
    stop smol
else
    skipped chat_equals_generate "$SMOL not fetched (make models)"
    skipped stop_string_and_end_of_generation "$SMOL not fetched (make models)"
fi

# every server exited 0 on SIGTERM, and none reported a sanitizer finding (under `make asan`)
echo "[ RUN      ] servers_exit_cleanly"
if [ -s "$W/exits" ] && ! grep -qv '^0 ' "$W/exits" &&
    ! grep -q 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' $LOGS; then ok servers_exit_cleanly
else
    cat "$W/exits"
    grep -l 'ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:' $LOGS | while read -r f; do
        echo "$f:"; head -60 "$f"; done
    bad servers_exit_cleanly
fi

rm -rf "$W"
marks_summary
