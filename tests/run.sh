#!/bin/sh
# Runs every test binary given, prints each one's verdict and a summary that
# counts skips separately (a skip is never a pass). Exit status: 0 only if no
# test failed.
pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
    name=$(basename "$t")
    out=$(BUILD="${BUILD:-build}" "$t" 2>&1); rc=$?
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*$/\1/p' | head -n 1)
    p=$(printf '%s\n' "$out" | grep -c '^\[       OK \]')
    s=${s:-0}
    skip=$((skip + s)); pass=$((pass + p))
    if [ $rc -ne 0 ]; then
        fail=$((fail + 1)); failed="$failed $name"
        printf '%s\n' "$out" | tail -n 40
        echo "FAIL  $name (exit $rc)"
    else
        printf 'ok    %-28s %3d passed, %d skipped\n' "$name" "$p" "$s"
        printf '%s\n' "$out" | grep -i 'skipped:' | sed 's/^/      /'
    fi
done
echo "tests: $pass passed, $skip skipped, $fail binaries failed"
[ $fail -eq 0 ] || { echo "failed:$failed"; exit 1; }
