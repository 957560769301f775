#!/bin/sh
# Runs every test given (a cmocka binary, or a shell script ending in .sh that
# reports with the same markers), prints each one's verdict, and ends with one
# totals line:
#
#   tests: P passed, F failed, S skipped
#
# counted in tests, not binaries: P from the "[       OK ]" lines, S and F from
# cmocka's "[  SKIPPED ] N test(s)" and "[  FAILED  ] N test(s)" summaries. A
# test that exits non-zero without reporting a failure (a crash, a failed group
# set-up) counts as one failed test. Only the totals line has the form
# "N passed, N failed", which CI tooling reads from the last such line. A skip is never a pass. Exit status: 0 only
# if nothing failed. TESTS_LABEL replaces "tests" in the totals line; where
# TESTS_TOTALS_FILE is set, the totals line is also appended to it (.ci/run sums them).
pass=0; fail=0; skip=0; failed=""
for t in "$@"; do
    name=$(basename "$t")
    case "$t" in
    *.sh) out=$(BUILD="${BUILD:-build}" sh "$t" 2>&1); rc=$? ;;
    *) out=$(BUILD="${BUILD:-build}" "$t" 2>&1); rc=$? ;;
    esac
    p=$(printf '%s\n' "$out" | grep -c '^\[       OK \]')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*$/\1/p' | awk '{n += $1} END {print n + 0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*$/\1/p' | awk '{n += $1} END {print n + 0}')
    [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
    pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
    if [ $rc -ne 0 ]; then
        failed="$failed $name"
        printf '%s\n' "$out" | tail -n 40
        printf 'FAIL  %-28s %3d failed, %d passed, %d skipped (exit %d)\n' "$name" "$f" "$p" "$s" "$rc"
    else
        printf 'ok    %-28s %3d passed, %d skipped\n' "$name" "$p" "$s"
        printf '%s\n' "$out" | grep -i 'skipped:' | sed 's/^/      /'
    fi
done
[ -z "$failed" ] || echo "failed:$failed"
totals="${TESTS_LABEL:-tests}: $pass passed, $fail failed, $skip skipped"
[ -z "${TESTS_TOTALS_FILE:-}" ] || echo "$totals" >> "$TESTS_TOTALS_FILE"
echo "$totals"
[ $fail -eq 0 ]
