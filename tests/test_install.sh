#!/bin/sh
# test_install.sh — the library installs and links like a library:
#   - `make install DESTDIR=... PREFIX=/usr` puts exactly lib/libtriforce.a,
#     lib/libtriforce.so.X.Y.Z with its links libtriforce.so.X and libtriforce.so,
#     include/triforce.h, lib/pkgconfig/triforce.pc and bin/triforce there, copies of
#     what $BUILD holds, with their modes; LIBDIR/INCLUDEDIR/BINDIR move them;
#   - the shared library's SONAME is libtriforce.so.X (X = TF_VERSION_MAJOR) and it
#     exports exactly the functions the header declares: none missing, none extra;
#   - the installed header compiles on its own, as strict C11 and as C++;
#   - a program written here, built with the installed triforce.pc (pkg-config,
#     relocated into DESTDIR with --define-prefix), once against the shared library
#     (run with LD_LIBRARY_PATH; it must record libtriforce.so.X) and once against the
#     static archive (pkg-config --static; it must need no libtriforce.so), checks
#     tf_version() against TF_VERSION_STRING and, where ../shared has stories260K,
#     generates with it through the public API (the golden greedy text);
#   - `make uninstall` with the same variables leaves no file behind.
# It installs what $BUILD holds and rebuilds nothing: it fails, asking for `make`, where
# $BUILD is not up to date. CC and OPT (from `make test`) compile the programs as the
# build was compiled: under `make asan`, with the sanitizers. Reports with cmocka's
# markers, which tests/run.sh counts. Runs from the repository root.
B=${BUILD:-build}
W=$B/test_install
CC=${CC:-cc}
OPT=${OPT:--O2}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
SH=${TF_SHARED_DIR:-../shared}
S260=$SH/models/stories260K/stories260K.gguf
. tests/common/marks.sh

part() { sed -n "s/^#define TF_VERSION_$1  *\([0-9][0-9]*\)\$/\1/p" include/triforce.h; }
M=$(part MAJOR)
V=$M.$(part MINOR).$(part PATCH)
[ -n "$M" ] && [ "$V" = "$(sed -n 's/^#define TF_VERSION_STRING "\(.*\)"$/\1/p' include/triforce.h)" ] ||
    { echo "test_install: include/triforce.h: TF_VERSION_MAJOR.MINOR.PATCH ($V) is not TF_VERSION_STRING"; exit 1; }

# make as the user would run it, without the jobserver and variables of a calling make;
# BUILD, CC and OPT (the environment) are those of this build
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="$B" "$@"; }

mk -q "$B/libtriforce.a" "$B/libtriforce.so.$V" "$B/libtriforce.so.$M" "$B/libtriforce.so" "$B/triforce" || {
    echo "test_install: $B is not up to date; run make (BUILD=$B) first: this test installs what is built and rebuilds nothing"
    exit 1
}
rm -rf "$W"; mkdir -p "$W" || exit 1
W=$(cd "$W" && pwd)
D=$W/dest
L=$D/usr/lib

echo "[ RUN      ] install_runs"
if mk install DESTDIR="$D" PREFIX=/usr > "$W/install.log" 2>&1; then ok install_runs
else cat "$W/install.log"; bad install_runs; fi

# exactly these files and links, nothing else
echo "[ RUN      ] install_files"
printf '%s\n' usr/bin/triforce usr/include/triforce.h usr/lib/libtriforce.a usr/lib/libtriforce.so \
    "usr/lib/libtriforce.so.$M" "usr/lib/libtriforce.so.$V" usr/lib/pkgconfig/triforce.pc | sort > "$W/want"
(cd "$D" 2>/dev/null && find . ! -type d | sed 's|^\./||' | sort) > "$W/got"
if cmp -s "$W/want" "$W/got"; then ok install_files
else echo "installed files differ from the expected list (< expected, > installed):"; diff "$W/want" "$W/got"; bad install_files; fi

# mode FILE: its permission bits in octal
mode() { stat -c %a "$1" 2>/dev/null; }
echo "[ RUN      ] install_copies_and_modes"
why=""
for f in libtriforce.a "libtriforce.so.$V"; do
    cmp -s "$B/$f" "$L/$f" || why="$why $f differs from $B/$f;"
    [ "$(mode "$L/$f")" = 644 ] || why="$why $f has mode $(mode "$L/$f"), expected 644;"
done
cmp -s include/triforce.h "$D/usr/include/triforce.h" || why="$why the header differs;"
[ "$(mode "$D/usr/include/triforce.h")" = 644 ] || why="$why the header's mode is not 644;"
cmp -s "$B/triforce" "$D/usr/bin/triforce" || why="$why bin/triforce differs from $B/triforce;"
[ "$(mode "$D/usr/bin/triforce")" = 755 ] || why="$why bin/triforce's mode is not 755;"
[ "$(mode "$L/pkgconfig/triforce.pc")" = 644 ] || why="$why triforce.pc's mode is not 644;"
if [ -z "$why" ]; then ok install_copies_and_modes; else echo "$why"; bad install_copies_and_modes; fi

# the links are relative, one step each, as ldconfig and packagers make them
echo "[ RUN      ] install_symlinks"
l1=$(readlink "$L/libtriforce.so.$M"); l2=$(readlink "$L/libtriforce.so")
if [ -L "$L/libtriforce.so.$M" ] && [ "$l1" = "libtriforce.so.$V" ] && [ -L "$L/libtriforce.so" ] &&
    [ "$l2" = "libtriforce.so.$M" ] && [ -f "$L/libtriforce.so" ]; then ok install_symlinks
else echo "libtriforce.so.$M -> '$l1' (want libtriforce.so.$V), libtriforce.so -> '$l2' (want libtriforce.so.$M)"
    bad install_symlinks; fi

echo "[ RUN      ] soname"
so=$(readelf -d "$L/libtriforce.so.$V" 2>&1 | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ "$so" = "libtriforce.so.$M" ]; then ok soname
else echo "SONAME of libtriforce.so.$V is '$so', expected libtriforce.so.$M"; bad soname; fi

# The functions the header declares: lines that begin a declaration (not a comment, a
# directive, a typedef or a struct member) and name tf_...( — found without regard to
# TF_API, so a declaration that lacks it shows up as missing.
echo "[ RUN      ] exports_are_the_header"
grep -v '^typedef' "$D/usr/include/triforce.h" | sed -n 's/^[A-Za-z].*[ *]\(tf_[a-z0-9_]*\)(.*/\1/p' | sort -u \
    > "$W/declared"
nm -D --defined-only "$L/libtriforce.so.$V" | awk 'NF == 3 {print $3}' | sort -u > "$W/exported"
n_decl=$(wc -l < "$W/declared")
missing=$(comm -23 "$W/declared" "$W/exported")
extra=$(comm -13 "$W/declared" "$W/exported")
if [ "$n_decl" -ge 40 ] && [ -z "$missing" ] && [ -z "$extra" ]; then ok exports_are_the_header
else
    echo "$n_decl functions declared in triforce.h, $(wc -l < "$W/exported") symbols exported"
    [ -z "$missing" ] || echo "declared but not exported:" $missing
    [ -z "$extra" ] || echo "exported but not declared:" $extra "(objects compiled before the library used" \
        "-fvisibility=hidden stay in $B, since make does not track flags: make clean, then make)"
    bad exports_are_the_header
fi

echo "[ RUN      ] header_alone_c11"
printf '#include <triforce.h>\nint main(void) { return tf_version() == 0; }\n' > "$W/alone.c"
if $CC -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$D/usr/include" -fsyntax-only "$W/alone.c" > "$W/cc.log" 2>&1
then ok header_alone_c11; else cat "$W/cc.log"; bad header_alone_c11; fi

echo "[ RUN      ] header_alone_cplusplus"
if command -v c++ > /dev/null 2>&1; then
    printf '#include <triforce.h>\nint main() { return tf_version() == nullptr; }\n' > "$W/alone.cc"
    if c++ -std=c++11 -Wall -Wextra -Werror -I"$D/usr/include" -fsyntax-only "$W/alone.cc" > "$W/cc.log" 2>&1
    then ok header_alone_cplusplus; else cat "$W/cc.log"; bad header_alone_cplusplus; fi
else skipped header_alone_cplusplus "no c++ compiler"; fi

# The program: the version check, then (given a model) the golden greedy continuation of
# stories260K through the decoder, printed as text.
cat > "$W/prog.c" << 'EOF'
#include <triforce.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (strcmp(tf_version(), TF_VERSION_STRING) != 0) {
        fprintf(stderr, "tf_version() is %s, TF_VERSION_STRING %s\n", tf_version(), TF_VERSION_STRING);
        return 1;
    }
    printf("version %s\n", tf_version());
    if (argc < 2) return 0;
    char err[512];
    tf_model *m;
    if (tf_model_load_file(&m, argv[1], NULL, err, sizeof err) != TF_OK) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    const char *prompt = "Once upon a time";
    int32_t toks[64];
    size_t n;
    if (tf_model_tokenize(m, prompt, strlen(prompt), true, false, toks, 64, &n) != TF_OK) return 1;
    tf_decoder_params dp = tf_decoder_default_params();
    dp.mode = TF_MODE_AR;
    dp.n_ctx = 64;
    dp.n_threads = 1;
    dp.device = TF_DEVICE_CPU;
    dp.sampling.temp = 0;
    tf_decoder *dec;
    if (tf_decoder_init(&dec, m, NULL, &dp, err, sizeof err) != TF_OK) {
        fprintf(stderr, "decoder: %s\n", err);
        return 1;
    }
    int rc = 1;
    char text[512];
    int len = snprintf(text, sizeof text, "%s", prompt);
    if (tf_decoder_prefill(dec, toks, (int32_t)n) != TF_OK) goto done;
    for (int got = 0; got < 12;) {
        int32_t out[16], k;
        if (tf_decoder_step(dec, out, 16, &k) != TF_OK) goto done;
        for (int i = 0; i < k; i++, got++) {
            int32_t np = tf_model_token_to_piece(m, out[i], false, text + len, (int32_t)sizeof text - len - 1);
            if (np < 0 || np > (int32_t)sizeof text - len - 1) goto done;
            len += np;
        }
    }
    text[len] = '\0';
    printf("text %s\n", text);
    rc = 0;
done:
    if (rc) fprintf(stderr, "decoding failed: %s\n", tf_decoder_error(dec));
    tf_decoder_free(dec);
    tf_model_close(m);
    return rc;
}
EOF

# pc ARGS...: pkg-config over the installed triforce.pc, its prefix moved into DESTDIR
pc() { PKG_CONFIG_PATH="$L/pkgconfig" "$PKG_CONFIG" --define-prefix "$@"; }
GOLDEN="Once upon a time, there was a little girl named Lily."
have_pc=0
if command -v "$PKG_CONFIG" > /dev/null 2>&1; then have_pc=1; fi

echo "[ RUN      ] pkgconfig_file"
if [ $have_pc -eq 0 ]; then skipped pkgconfig_file "$PKG_CONFIG not installed (apt-get install pkg-config)"
else
    flags=$(pc --cflags --libs triforce 2>&1); ver=$(pc --modversion triforce 2>&1)
    sflags=$(pc --static --libs triforce 2>&1)
    case "$flags" in
    *"-I$D/usr/include"*"-L$L "*"-ltriforce"*) okflags=1 ;;
    *) okflags=0 ;;
    esac
    # every library the shared library needs appears in the static flags, bar libc and the
    # sanitizer runtimes of `make asan` (a program's own -fsanitize brings those)
    need_missing=""
    for lib in $(readelf -d "$L/libtriforce.so.$V" | sed -n 's/.*(NEEDED).*\[lib\([^.]*\)\.so.*\].*/\1/p'); do
        case "$lib" in c | asan | ubsan | lsan | tsan) continue ;; esac
        case " $sflags " in *" -l$lib "*) ;; *) need_missing="$need_missing -l$lib" ;; esac
    done
    if [ $okflags -eq 1 ] && [ "$ver" = "$V" ] && [ -z "$need_missing" ]; then ok pkgconfig_file
    else
        echo "pkg-config --cflags --libs: $flags"; echo "--modversion: $ver (want $V)"
        echo "--static --libs: $sflags"; [ -z "$need_missing" ] || echo "missing from the static flags:$need_missing"
        cat "$L/pkgconfig/triforce.pc"; bad pkgconfig_file
    fi
fi

# check_run NAME BINARY: prints the version, and the golden text where the model exists
check_run() {
    name=$1; shift
    "$@" ${have_model:+"$S260"} > "$W/run.out" 2> "$W/run.err"; rc=$?
    if [ $rc -eq 0 ] && grep -qxF "version $V" "$W/run.out" &&
        { [ -z "$have_model" ] || grep -q "^text $GOLDEN" "$W/run.out"; }; then return 0; fi
    echo "exit $rc; stdout:"; cat "$W/run.out"; echo "stderr:"; cat "$W/run.err"
    return 1
}
have_model=""
[ -f "$S260" ] && have_model=1
[ -n "$have_model" ] || skipped generate_through_installed_library "no $S260 (the programs check the version only)"

echo "[ RUN      ] link_shared"
if [ $have_pc -eq 0 ]; then skipped link_shared "$PKG_CONFIG not installed"
elif ! $CC $OPT -std=c11 -Wall -Werror -o "$W/prog_shared" "$W/prog.c" $(pc --cflags --libs triforce) \
    > "$W/cc.log" 2>&1; then cat "$W/cc.log"; bad link_shared
elif ! readelf -d "$W/prog_shared" | grep -q "(NEEDED).*\[libtriforce.so.$M\]"; then
    echo "prog_shared does not record libtriforce.so.$M:"; readelf -d "$W/prog_shared" | grep NEEDED; bad link_shared
elif check_run link_shared env LD_LIBRARY_PATH="$L" "$W/prog_shared"; then ok link_shared
else bad link_shared; fi

# The static archive: GNU ld's -l:libtriforce.a in place of -ltriforce picks it where the
# shared library lies beside it (docs/LIBRARY.md); the rest are the --static flags.
echo "[ RUN      ] link_static"
if [ $have_pc -eq 0 ]; then skipped link_static "$PKG_CONFIG not installed"
elif ! $CC $OPT -std=c11 -Wall -Werror -o "$W/prog_static" "$W/prog.c" $(pc --cflags triforce) \
    $(pc --static --libs triforce | sed 's/-ltriforce\( \|$\)/-l:libtriforce.a\1/') > "$W/cc.log" 2>&1; then
    cat "$W/cc.log"; bad link_static
elif readelf -d "$W/prog_static" | grep -q "(NEEDED).*libtriforce"; then
    echo "prog_static needs a shared libtriforce:"; readelf -d "$W/prog_static" | grep NEEDED; bad link_static
elif check_run link_static env -u LD_LIBRARY_PATH "$W/prog_static"; then ok link_static
else bad link_static; fi

echo "[ RUN      ] uninstall"
if mk uninstall DESTDIR="$D" PREFIX=/usr > "$W/uninstall.log" 2>&1 && [ -z "$(find "$D" ! -type d)" ]; then ok uninstall
else cat "$W/uninstall.log"; echo "left behind:"; find "$D" ! -type d; bad uninstall; fi

# other directories: every variable honoured, the .pc's paths follow
echo "[ RUN      ] install_directories"
D2=$W/dest2
if mk install DESTDIR="$D2" PREFIX=/opt/tf LIBDIR=/opt/tf/lib64 INCLUDEDIR=/opt/tf/inc BINDIR=/opt/tf/sbin \
    > "$W/install2.log" 2>&1 && [ -f "$D2/opt/tf/lib64/libtriforce.so.$V" ] && [ -f "$D2/opt/tf/lib64/libtriforce.a" ] &&
    [ -f "$D2/opt/tf/inc/triforce.h" ] && [ -x "$D2/opt/tf/sbin/triforce" ] &&
    grep -qxF 'libdir=${prefix}/lib64' "$D2/opt/tf/lib64/pkgconfig/triforce.pc" &&
    grep -qxF 'includedir=${prefix}/inc' "$D2/opt/tf/lib64/pkgconfig/triforce.pc" &&
    grep -qxF 'prefix=/opt/tf' "$D2/opt/tf/lib64/pkgconfig/triforce.pc" &&
    mk uninstall DESTDIR="$D2" PREFIX=/opt/tf LIBDIR=/opt/tf/lib64 INCLUDEDIR=/opt/tf/inc BINDIR=/opt/tf/sbin \
        >> "$W/install2.log" 2>&1 && [ -z "$(find "$D2" ! -type d)" ]; then ok install_directories
else cat "$W/install2.log"; find "$D2" ! -type d; bad install_directories; fi

rm -rf "$W"
marks_summary
