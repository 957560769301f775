# marks.sh — sourced by the shell tests (from the repository root): result lines
# with cmocka's markers, which tests/run.sh counts, and the counters behind them.
#   ok NAME             the case passed
#   bad NAME            the case failed (listed again in the summary)
#   skipped NAME WHY    the case could not run here, and why
pass=0; fail=0; skip=0; failed=""
ok() { echo "[       OK ] $1"; pass=$((pass + 1)); }
bad() { echo "[  FAILED  ] $1"; fail=$((fail + 1)); failed="$failed $1"; }
skipped() { echo "skipped: $2 ($1)"; echo "[  SKIPPED ] $1"; skip=$((skip + 1)); }

# marks_summary: cmocka's closing lines, whose "[  SKIPPED ] N test(s)" and
# "[  FAILED  ] N test(s)" tests/run.sh counts; exits 1 if a case failed, else 0.
marks_summary() {
    echo "[  PASSED  ] $pass test(s)."
    [ $skip -eq 0 ] || echo "[  SKIPPED ] $skip test(s), listed below:"
    if [ $fail -ne 0 ]; then
        echo "[  FAILED  ] $fail test(s), listed below:"
        for f in $failed; do echo "[  FAILED  ] $f"; done
        exit 1
    fi
    exit 0
}
