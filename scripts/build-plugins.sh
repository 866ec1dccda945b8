#!/usr/bin/env bash
# The one build entry point for every wasm-informer plugin, in every language.
#
#   scripts/build-plugins.sh [-f] [NAME...]
#
# Builds each plugin folder into target/plugins/<folder-name>.wasm:
#   plugins/<name>/Cargo.toml  Rust    cargo build --profile guest --target wasm32-wasip2
#   plugins/<name>/plugin.js   JS      componentize-js (sdk/js/build.mjs)
#   plugins/<name>/app.py      Python  componentize-py, with sdk/python on the path
#   plugins/<name>/plugin.c    C       clang-19 + wasm-component-ld, with sdk/c and the
#                                      bindings in sdk/c/bindings (wit-bindgen c for a frozen WIT)
# Folders under plugins/testing/ (test guests) and the SDK templates
# (sdk/js/template -> js-template, sdk/js/template-controller ->
# js-controller-template, and likewise python-* and c-*) are built the same way.
#
# World: a JS, Python or C plugin is a `controller` when its main file
# (plugin.js, app.py, plugin.c) has a comment line `wasm-informer-world:
# controller`, or else when it exports the reconciler (JS `export const
# reconciler`, Python `class Reconciler`, C defines
# `exports_wasm_informer_plugin_reconciler_reconcile`); otherwise an
# `event-handler`. A Rust plugin's world comes from its SDK macro. Test
# fixtures of a frozen package carry `wasm-informer-wit: v0.1` (or `v0.2.0`)
# the same way and are built against wit/v0.1 (wit/v0.2.0), without the SDK;
# a Rust one names that directory in its own `generate!` (echo-v01, echo-v02).
#
# Incremental: a plugin whose output is newer than its sources (its folder, its
# language's SDK and wit/) is skipped; -f rebuilds anyway. NAME... limits the
# build to those plugins. A missing toolchain is an error naming the install
# command; no language is ever skipped.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/target/plugins"
WIT="$ROOT/wit"
FORCE=0
ONLY=()
for a in "$@"; do
    case "$a" in
        -f|--force) FORCE=1 ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        -*) echo "build-plugins: unknown option $a" >&2; exit 2 ;;
        *) ONLY+=("$a") ;;
    esac
done

die() { echo "build-plugins: error: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# ---- toolchain checks (each returns a clear error) -------------------------
check_rust() {
    command -v cargo >/dev/null || die "cargo not found: install Rust with rustup"
    rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 \
        || die "Rust target wasm32-wasip2 missing: run 'rustup target add wasm32-wasip2' (or scripts/setup.sh)"
}
check_js() {
    command -v node >/dev/null || die "node not found: install Node.js >= 18 (apt-get install nodejs npm)"
    [ -d "$ROOT/sdk/js/node_modules/@bytecodealliance/componentize-js" ] \
        || die "componentize-js missing: run '(cd sdk/js && npm ci)' (or scripts/setup.sh)"
}
PY_TOOL="$ROOT/.venv/bin/componentize-py"
check_py() {
    [ -x "$PY_TOOL" ] \
        || die "componentize-py missing: run 'python3 -m venv .venv && .venv/bin/pip install -r sdk/python/requirements.txt' (or scripts/setup.sh)"
}
WASM_COMPONENT_LD=""
C_BINDINGS="$ROOT/sdk/c/bindings"
check_c() {
    command -v clang-19 >/dev/null \
        || die "clang-19 not found: run 'apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32' (or scripts/setup.sh)"
    [ -n "$(find /usr/lib/llvm-19/lib/clang/19/lib -name 'libclang_rt.builtins*wasm32*' 2>/dev/null | head -1)" ] \
        || die "wasm32 compiler runtime missing: run 'apt-get install libclang-rt-19-dev-wasm32' (or scripts/setup.sh)"
    [ -d /usr/include/wasm32-wasi ] \
        || die "wasi-libc missing: run 'apt-get install wasi-libc' (or scripts/setup.sh)"
    WASM_COMPONENT_LD="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/wasm-component-ld"
    [ -x "$WASM_COMPONENT_LD" ] || die "wasm-component-ld not found at $WASM_COMPONENT_LD: run 'rustup target add wasm32-wasip2'"
}

# ---- incremental check -----------------------------------------------------
# up_to_date OUT SRC... : true when OUT exists and no file under SRC is newer.
up_to_date() {
    local out="$1"; shift
    [ "$FORCE" -eq 0 ] || return 1
    [ -f "$out" ] || return 1
    local newer
    newer="$(find "$@" -type f -newer "$out" \
        -not -path '*/node_modules/*' -not -path '*/__pycache__/*' -not -path '*/target/*' 2>/dev/null | head -1)"
    [ -z "$newer" ]
}

# ---- per-language builders -------------------------------------------------
build_rust() {
    local name="$1" dir="$2" out="$3"
    check_rust
    local crate
    crate="$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)"
    [ -n "$crate" ] || die "$dir/Cargo.toml: no [package] name"
    # The same profile and target directory as host/guest-artifacts, which builds
    # the Rust guests for the tests: the two share compiled crates, and neither
    # waits on the lock of the host build's target directory.
    # One guest directory per checkout, named as host/guest-artifacts names it.
    local checkout="${ROOT#/}"
    checkout="${checkout%/}"
    checkout="${checkout//[\/:\\]/_}"
    local tdir="${WASM_INFORMER_GUEST_TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/guests/$checkout}"
    # `|| die`: this runs as an `if` condition, where `set -e` does not stop
    # a failed build from copying an earlier component.
    (cd "$ROOT" && env -u CARGO_TARGET_DIR cargo build --profile guest --target wasm32-wasip2 \
        --target-dir "$tdir" -p "$crate" -j 2 --quiet) || die "$name: cargo build failed"
    local built="$tdir/wasm32-wasip2/guest/${crate//-/_}.wasm"
    [ -f "$built" ] || die "$name: cargo built no $built (is the crate a cdylib?)"
    cp "$built" "$out"
}

build_js() {
    local name="$1" dir="$2" out="$3" wit="$4" world="$5"
    check_js
    node "$ROOT/sdk/js/build.mjs" "$dir/plugin.js" "$out" --wit "$wit" --world "$world"
}

build_py() {
    local name="$1" dir="$2" out="$3" wit="$4" world="$5"
    check_py
    # componentize-py writes its generated bindings into a temporary directory.
    # A 0.1 fixture does not use the SDK (which targets 0.2).
    local sdk=(-p "$ROOT/sdk/python")
    [ "$wit" = "$WIT" ] || sdk=()
    (cd "$dir" && "$PY_TOOL" -d "$wit" -w "$world" componentize \
        -p "$dir" "${sdk[@]}" app -o "$out" >/dev/null)
}

build_c() {
    local name="$1" dir="$2" out="$3" wit="$4" world="$5"
    check_c
    local gen="$OUT/.c-gen/$name"
    rm -rf "$gen" && mkdir -p "$gen"
    # Both worlds generate `plugin.h`, so sdk/c compiles against either. The
    # current WIT's bindings are kept in sdk/c/bindings (scripts/gen-c-bindings.sh);
    # a frozen WIT's are generated here.
    if [ "$wit" = "$WIT" ]; then
        local have want
        have="$(cat "$C_BINDINGS/WIT.sha256" 2>/dev/null || true)"
        want="$(cat "$WIT"/*.wit | sha256sum | cut -d' ' -f1)"
        [ "$have" = "$want" ] \
            || die "$name: sdk/c/bindings was generated from another wit/: run scripts/gen-c-bindings.sh (needs wit-bindgen: scripts/setup.sh wit-bindgen)"
        cp "$C_BINDINGS/$world"/* "$gen"/
    else
        command -v wit-bindgen >/dev/null && wit-bindgen --version | grep -q '0\.63\.' \
            || die "$name: built against ${wit#"$ROOT/"}, which needs wit-bindgen 0.63: run 'scripts/setup.sh wit-bindgen'"
        local msg
        if ! msg="$(wit-bindgen c "$wit" --world "$world" --rename-world plugin \
            --out-dir "$gen" 2>&1)"; then
            echo "$msg" >&2
            die "$name: wit-bindgen c failed"
        fi
    fi
    # The SDK helpers, for 0.2 plugins.
    local sdk=("$ROOT/sdk/c/wasm_informer.c" "$ROOT/sdk/c/wi_json.c")
    [ "$wit" = "$WIT" ] || sdk=()
    clang-19 --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror \
        -Wno-unused-parameter -I "$gen" -I "$ROOT/sdk/c" -I "$dir" \
        "$dir"/*.c "${sdk[@]}" "$gen/plugin.c" "$gen/plugin_component_type.o" \
        -fuse-ld="$WASM_COMPONENT_LD" -Wl,--wasi-adapter=reactor \
        -o "$out"
}

# marker FILE KEY: the value of the first `KEY: value` line in FILE, if any.
marker() {
    sed -n "s/.*$2:[[:space:]]*\([A-Za-z0-9._-]*\).*/\1/p" "$1" | head -1
}

# world_of LANG DIR MAIN: the marker's world, or the one the exports imply.
world_of() {
    local lang="$1" dir="$2" main="$3" w
    w="$(marker "$main" wasm-informer-world)"
    if [ -z "$w" ]; then
        w=event-handler
        case "$lang" in
            js) grep -Eq '^[[:space:]]*export[[:space:]]+(const|let|var|function)[[:space:]]+reconciler\b' "$main" && w=controller ;;
            py) grep -Eq '^class[[:space:]]+Reconciler\b' "$main" && w=controller ;;
            c) grep -q 'exports_wasm_informer_plugin_reconciler_reconcile' "$dir"/*.c && w=controller ;;
        esac
    fi
    case "$w" in
        event-handler|controller) echo "$w" ;;
        *) die "$main: wasm-informer-world: $w is not event-handler or controller" ;;
    esac
}

# ---- discovery -------------------------------------------------------------
mkdir -p "$OUT"
built=0
skipped=0
found=0
# The SDK templates are built too (as js-template and python-template), so a
# template that no longer builds is caught here.
for dir in "$ROOT"/plugins/*/ "$ROOT"/plugins/testing/*/ \
    "$ROOT"/sdk/js/template*/ "$ROOT"/sdk/python/template*/ "$ROOT"/sdk/c/template*/; do
    [ -d "$dir" ] || continue
    dir="${dir%/}"
    name="$(basename "$dir")"
    [ "$name" = "testing" ] && continue
    case "$dir" in
        "$ROOT"/sdk/js/template*) name="js-${name}" ;;
        "$ROOT"/sdk/python/template*) name="python-${name}" ;;
        "$ROOT"/sdk/c/template*) name="c-${name}" ;;
    esac
    # template-controller -> js-controller-template
    case "$name" in *-template-controller) name="${name%-template-controller}-controller-template" ;; esac
    if [ "${#ONLY[@]}" -gt 0 ] && ! printf '%s\n' "${ONLY[@]}" | grep -qx "$name"; then
        continue
    fi
    main=""
    if [ -f "$dir/Cargo.toml" ]; then
        lang=rust; sdk=("$ROOT/sdk/rust")
    elif [ -f "$dir/plugin.js" ]; then
        lang=js; main="$dir/plugin.js"
        sdk=("$ROOT/sdk/js/src" "$ROOT/sdk/js/build.mjs" "$ROOT/sdk/js/package-lock.json")
    elif [ -f "$dir/app.py" ]; then
        lang=py; main="$dir/app.py"
        sdk=("$ROOT/sdk/python/wasm_informer" "$ROOT/sdk/python/requirements.txt")
    elif [ -f "$dir/plugin.c" ]; then
        lang=c; main="$dir/plugin.c"
        sdk=("$ROOT/sdk/c/wasm_informer.c" "$ROOT/sdk/c/wasm_informer.h" "$ROOT/sdk/c/wi_json.c" "$ROOT/sdk/c/wi_json.h" "$ROOT/sdk/c/bindings")
    else
        die "$dir: not a plugin (expected Cargo.toml, plugin.js, app.py or plugin.c)"
    fi
    found=$((found + 1))
    out="$OUT/$name.wasm"
    if up_to_date "$out" "$dir" "${sdk[@]}" "$WIT"; then
        skipped=$((skipped + 1))
        continue
    fi
    world="event-handler"
    wit="$WIT"
    if [ -n "$main" ]; then
        world="$(world_of "$lang" "$dir" "$main")"
        v="$(marker "$main" wasm-informer-wit)"
        if [ -n "$v" ]; then
            wit="$ROOT/wit/$v"
            [ -f "$wit/world.wit" ] || die "$main: wasm-informer-wit: $v: no $wit/world.wit"
        fi
    fi
    started="$(now_ms)"
    tmp="$out.tmp.wasm"
    rm -f "$tmp"
    if ! "build_$lang" "$name" "$dir" "$tmp" "$wit" "$world"; then
        rm -f "$tmp"
        die "$name ($lang) failed to build"
    fi
    mv "$tmp" "$out"
    size="$(stat -c %s "$out")"
    what="$lang"
    [ -z "$main" ] || what="$lang, $world${wit#"$WIT"}"
    echo "build-plugins: $name ($what) -> target/plugins/$name.wasm $((size / 1024)) KiB in $(( ($(now_ms) - started) ))ms" >&2
    built=$((built + 1))
done
if [ "${#ONLY[@]}" -gt 0 ] && [ "$found" -ne "${#ONLY[@]}" ]; then
    die "asked for ${ONLY[*]} but found only $found of them under plugins/"
fi
echo "build-plugins: $built built, $skipped up to date" >&2
