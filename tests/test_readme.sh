#!/bin/sh
# test_readme.sh — README.md's commands, run as written.
#
# Every fenced block of README.md whose info string starts with "sh" carries a second word
# that says what this test does with it:
#
#   ```sh setup      the set-up commands: they must equal, line for line, the lines of
#                    .ci/run between "# readme-setup: begin" and "# readme-setup: end"
#                    (less a trailing ` || ci_failed ...`), so CI runs exactly them;
#   ```sh run        example commands: run with sh -e in a scratch folder,
#                    $BUILD/readme/run, where ./triforce is this build's CLI and
#                    ../shared is this checkout's ../shared; they must exit 0. A block
#                    that names ../shared is skipped ("skipped: ../shared/... not found")
#                    where ../shared is absent, and one that names models/FILE where
#                    make models has not fetched it ("skipped: models/... not found");
#   ```text expect   (right after a `sh run` block) lines that block must print, on stdout
#                    or stderr; "..." matches any text;
#   ```sh download   commands that need models the reader downloads: reported as skipped.
#
# A "sh" block with no such word fails the test, so that no example escapes it. Output uses
# cmocka's markers, which tests/run.sh counts. Runs from the repository root; BUILD names
# the build folder (default build).
B=${BUILD:-build}
README=README.md
CI=.ci/run
SH=${TF_SHARED_DIR:-../shared}
W=$B/readme
. tests/common/marks.sh

rm -rf "$W"
mkdir -p "$W/blocks" "$W/run" || exit 1
if [ -d "$SH" ]; then
    ln -s "$(cd "$SH" && pwd)" "$W/shared"
    have_shared=1
else
    have_shared=0
fi
[ -x "$B/triforce" ] || { echo "test_readme: $B/triforce not built"; exit 1; }
ln -s "$(cd "$B" && pwd)/triforce" "$W/run/triforce"
# models/ (make models) is this checkout's
[ -d models ] && ln -s "$(pwd)/models" "$W/run/models"

# Split README.md into its fenced blocks: $W/blocks/N holds block N's lines, and
# $W/blocks/index one line per block, "N LINE INFO..." (LINE: the opening fence).
awk -v dir="$W/blocks" '
    /^```/ {
        if (inblock) { inblock = 0; close(f); next }
        n++; inblock = 1; f = dir "/" n
        print n, NR, substr($0, 4) > (dir "/index")
        printf "" > f
        next
    }
    inblock { print > f }
' "$README"
[ -f "$W/blocks/index" ] || { echo "test_readme: no fenced blocks in $README"; exit 1; }

# The lines of .ci/run between the markers, less a trailing " || ci_failed ...".
sed -n '/^# readme-setup: begin$/,/^# readme-setup: end$/p' "$CI" | sed -e '1d' -e '$d' \
    -e 's/ || ci_failed .*$//' > "$W/ci_setup"

# grep pattern for an expected line: regex characters quoted, "..." as ".*".
expect_pattern() {
    printf '%s\n' "$1" | sed -e 's/[][\.*^$]/\\&/g' -e 's/\\\.\\\.\\\./.*/g'
}

n_setup=0
last_run=""; last_log=""; run_skipped=""
while read -r n line info; do
    blk="$W/blocks/$n"
    name="README.md:$line"
    case "$info" in
    "sh setup")
        n_setup=$((n_setup + 1))
        echo "[ RUN      ] $name setup = .ci/run"
        if [ ! -s "$W/ci_setup" ]; then
            echo "$CI has no lines between '# readme-setup: begin' and '# readme-setup: end'"
            bad "$name"
        elif cmp -s "$blk" "$W/ci_setup"; then
            ok "$name"
        else
            echo "README.md's set-up commands and $CI's differ:"
            diff "$blk" "$W/ci_setup" | sed 's/^/    /'
            bad "$name"
        fi
        last_run=""; run_skipped="" ;;
    "sh run")
        echo "[ RUN      ] $name"
        last_run=""; run_skipped=""
        need=$(grep -o '\.\./shared/[^ "]*' "$blk" | head -n 1)
        if [ -n "$need" ] && [ $have_shared -eq 0 ]; then
            run_skipped="$need not found"
            skipped "$name" "$run_skipped"
            continue
        fi
        model=$(grep -o '\(^\|[ "=]\)models/[A-Za-z0-9._-]*' "$blk" | head -n 1 | sed 's/^[ "=]//')
        if [ -n "$model" ] && [ ! -f "$model" ]; then
            run_skipped="$model not found (make models)"
            skipped "$name" "$run_skipped"
            continue
        fi
        log="$W/$n.log"
        if (cd "$W/run" && timeout 900 sh -e "../blocks/$n") < /dev/null > "$log" 2>&1; then
            ok "$name"
            last_run=$name; last_log=$log
        else
            rc=$?
            sed 's/^/    /' "$blk"
            echo "  exited $rc; its output ends:"
            tail -n 20 "$log" | sed 's/^/    /'
            bad "$name"
        fi ;;
    "text expect")
        echo "[ RUN      ] $name expected output"
        if [ -z "$last_run" ]; then
            if [ -n "$run_skipped" ]; then
                skipped "$name" "$run_skipped"
            else
                echo "an expected output must follow a 'sh run' block that ran"
                bad "$name"
            fi
            continue
        fi
        missing=0
        while IFS= read -r want; do
            [ -n "$want" ] || continue
            if ! grep -q "^$(expect_pattern "$want")\$" "$last_log"; then
                echo "$last_run printed no line like: $want"
                missing=1
            fi
        done < "$blk"
        if [ $missing -eq 0 ]; then ok "$name"; else tail -n 20 "$last_log" | sed 's/^/    /'; bad "$name"; fi
        last_run=""; run_skipped="" ;;
    "sh download")
        skipped "$name" "needs models downloaded by the reader"
        last_run=""; run_skipped="" ;;
    sh*)
        echo "[ RUN      ] $name"
        echo "a '$info' block: tag it 'sh setup', 'sh run' or 'sh download' (see tests/test_readme.sh)"
        bad "$name" ;;
    *) last_run=""; run_skipped="" ;;
    esac
done < "$W/blocks/index"

echo "[ RUN      ] README.md one set-up block"
if [ $n_setup -eq 1 ]; then ok "README.md set-up block"; else echo "found $n_setup 'sh setup' blocks"; bad "README.md set-up block"; fi

# The examples write large files (a 1.3 GB model among them).
rm -rf "$W/run"
marks_summary
