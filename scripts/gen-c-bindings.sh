#!/usr/bin/env bash
# The C bindings of the current WIT (wit/world.wit), generated once by `wit-bindgen c` and kept
# in sdk/c/bindings/<world>/ so that building a C plugin needs clang alone:
#
#   scripts/gen-c-bindings.sh           regenerate sdk/c/bindings (after a change to wit/)
#   scripts/gen-c-bindings.sh --check   fail when sdk/c/bindings is not what wit-bindgen makes
#
# Each world's directory holds plugin.h, plugin.c and plugin_component_type.o, as
# `wit-bindgen c wit --world WORLD --rename-world plugin` writes them. sdk/c/bindings/WIT.sha256
# is the hash of the WIT they were made from: scripts/build-plugins.sh compares it with wit/ and
# refuses stale bindings, naming this script.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/sdk/c/bindings"
WORLDS=(event-handler controller)
CHECK=0
case "${1:-}" in
    --check) CHECK=1 ;;
    "") ;;
    *) echo "gen-c-bindings: unknown argument $1 (expected --check)" >&2; exit 2 ;;
esac

command -v wit-bindgen >/dev/null && wit-bindgen --version | grep -q '0\.63\.' \
    || { echo "gen-c-bindings: error: wit-bindgen 0.63 not found: run 'scripts/setup.sh wit-bindgen'" >&2; exit 1; }

# The hash of the WIT the bindings come from (wit/*.wit; the frozen versions in
# subdirectories are not part of it).
wit_hash() { cat "$ROOT"/wit/*.wit | sha256sum | cut -d' ' -f1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for w in "${WORLDS[@]}"; do
    mkdir -p "$tmp/$w"
    if ! wit-bindgen c "$ROOT/wit" --world "$w" --rename-world plugin --out-dir "$tmp/$w" \
        >"$tmp/log" 2>&1; then
        cat "$tmp/log" >&2
        echo "gen-c-bindings: error: wit-bindgen c failed for the world $w" >&2
        exit 1
    fi
    rm -f "$tmp/log"
done
wit_hash > "$tmp/WIT.sha256"

if [ "$CHECK" -eq 1 ]; then
    if ! diff -r "$tmp" "$DEST" >/dev/null 2>&1; then
        diff -r "$tmp" "$DEST" >&2 || true
        echo "gen-c-bindings: error: sdk/c/bindings is not what wit-bindgen makes of wit/: run scripts/gen-c-bindings.sh and commit the result" >&2
        exit 1
    fi
    echo "gen-c-bindings: sdk/c/bindings matches wit/" >&2
    exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST"
cp -r "$tmp"/. "$DEST"/
echo "gen-c-bindings: wrote sdk/c/bindings for ${WORLDS[*]}" >&2
