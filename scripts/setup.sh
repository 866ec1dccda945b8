#!/usr/bin/env bash
# Fresh-machine setup for building every wasm-informer plugin (Rust, JavaScript,
# Python, C) and running the tests. Idempotent: each step checks first and does
# nothing when its tool is already present, so a second run takes seconds.
#
#   scripts/setup.sh [--demo] [STEP...]
#
# Runs as root on a fresh Debian machine (CI), or as a user with sudo.
#
# Steps, each timed on stderr (all of them when none is named):
#   target       rustup target wasm32-wasip2             (Rust plugins)
#   apt          clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 (C plugins), and for the
#                tests kubectl, prometheus (promtool), docker-registry and tmux
#   wit-bindgen  cargo install wit-bindgen-cli 0.63.0     (regenerating sdk/c/bindings, and the
#                C template a `wasm-informer new --lang c` project builds with)
#   js           npm ci in sdk/js                         (componentize-js + jco, pinned)
#   python       python venv at .venv + componentize-py  (pinned by sdk/python/requirements.txt)
#   conformance  apisim's client conformance suite: a venv at apisim/conformance/python/.venv
#                (PyPI kubernetes) and npm ci in apisim/conformance/node (@kubernetes/client-node)
#
# --demo sets up what `make demo` needs and nothing more: target, js, python, and apt with the
# C compiler only (the C plugins build from the bindings in sdk/c/bindings, without wit-bindgen).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WIT_BINDGEN_VERSION="0.63.0"
# prometheus brings promtool, which checks the host's /metrics output in the tests;
# docker-registry is the OCI registry the pull and push tests start on loopback;
# tmux is the real terminal the live view is tested in.
APT_C=(clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)
APT_PACKAGES=("${APT_C[@]}" kubectl prometheus docker-registry tmux)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

step_start=0
step() {
    step_start=$(date +%s%3N)
    echo "setup: $1" >&2
}
step_done() {
    local ms=$(( $(date +%s%3N) - step_start ))
    printf 'setup: %s done in %d.%01d s\n' "$1" $((ms / 1000)) $(((ms % 1000) / 100)) >&2
}

need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "setup: error: '$1' is required but not installed ($2)" >&2
        exit 1
    fi
}

need rustup "install the Rust toolchain with rustup first"
need cargo "install the Rust toolchain with rustup first"

ALL_STEPS=(target apt wit-bindgen js python conformance)
STEPS=()
for a in "$@"; do
    case "$a" in
        --demo) APT_PACKAGES=("${APT_C[@]}"); STEPS+=(target apt js python) ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        target|apt|wit-bindgen|js|python|conformance) STEPS+=("$a") ;;
        *) echo "setup: error: unknown step '$a' (expected --demo or one of: ${ALL_STEPS[*]})" >&2; exit 2 ;;
    esac
done
[ "${#STEPS[@]}" -gt 0 ] || STEPS=("${ALL_STEPS[@]}")

# Rust wasm target.
step_target() {
    step "rustup target wasm32-wasip2"
    if rustup target list --installed | grep -qx wasm32-wasip2; then
        echo "setup:   already installed" >&2
    else
        rustup target add wasm32-wasip2
    fi
    step_done "rustup target"
}

# Debian packages.
step_apt() {
    step "apt packages: ${APT_PACKAGES[*]}"
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "setup:   already installed" >&2
    else
        echo "setup:   installing: ${missing[*]}" >&2
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    step_done "apt packages"
}

# wit-bindgen CLI (C bindings).
step_wit-bindgen() {
    step "wit-bindgen-cli ${WIT_BINDGEN_VERSION}"
    if command -v wit-bindgen >/dev/null 2>&1 && wit-bindgen --version | grep -q "${WIT_BINDGEN_VERSION}"; then
        echo "setup:   already installed ($(wit-bindgen --version))" >&2
    else
        # Only the C generator is needed; skipping the other languages shortens the build.
        cargo install --locked "wit-bindgen-cli@${WIT_BINDGEN_VERSION}" --no-default-features --features c -j 2
    fi
    step_done "wit-bindgen-cli"
}

# JavaScript SDK dependencies.
step_js() {
    need npm "apt-get install nodejs npm (Node.js 18 or newer)"
    step "npm ci (sdk/js)"
    if [ -f "$ROOT/sdk/js/node_modules/.package-lock.json" ] \
        && [ "$ROOT/sdk/js/node_modules/.package-lock.json" -nt "$ROOT/sdk/js/package-lock.json" ]; then
        echo "setup:   node_modules is up to date" >&2
    else
        (cd "$ROOT/sdk/js" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    step_done "npm ci"
}

# Python venv with componentize-py.
step_python() {
    need python3 "apt-get install python3 python3-venv"
    step "python venv (.venv) + componentize-py"
    REQ="$ROOT/sdk/python/requirements.txt"
    STAMP="$ROOT/.venv/.requirements-installed"
    if [ -x "$ROOT/.venv/bin/componentize-py" ] && [ -f "$STAMP" ] && cmp -s "$REQ" "$STAMP"; then
        echo "setup:   .venv is up to date" >&2
    else
        if [ ! -x "$ROOT/.venv/bin/python" ]; then
            python3 -m venv "$ROOT/.venv"
        fi
        "$ROOT/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
        cp "$REQ" "$STAMP"
    fi
    step_done "python venv"
}

# apisim's third-party client conformance suite: a Python venv (kept apart from .venv, whose
# stamp tracks the plugin SDK's requirements only) and its Node dependencies.
step_conformance() {
    #    stamp tracks the plugin SDK's requirements only).
    step "python venv (apisim/conformance/python/.venv) + kubernetes client"
    CREQ="$ROOT/apisim/conformance/python/requirements.txt"
    CVENV="$ROOT/apisim/conformance/python/.venv"
    CSTAMP="$CVENV/.requirements-installed"
    if [ -x "$CVENV/bin/python" ] && [ -f "$CSTAMP" ] && cmp -s "$CREQ" "$CSTAMP"; then
        echo "setup:   apisim/conformance/python/.venv is up to date" >&2
    else
        if [ ! -x "$CVENV/bin/python" ]; then
            python3 -m venv "$CVENV"
        fi
        "$CVENV/bin/pip" install --quiet --disable-pip-version-check -r "$CREQ"
        cp "$CREQ" "$CSTAMP"
    fi
    step_done "conformance python venv"

    # 7. Node dependencies of the conformance suite.
    step "npm ci (apisim/conformance/node)"
    CNODE="$ROOT/apisim/conformance/node"
    if [ -f "$CNODE/node_modules/.package-lock.json" ] \
        && [ "$CNODE/node_modules/.package-lock.json" -nt "$CNODE/package-lock.json" ]; then
        echo "setup:   node_modules is up to date" >&2
    else
        (cd "$CNODE" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    step_done "conformance npm ci"
}

for s in "${STEPS[@]}"; do
    "step_$s"
done
echo "setup: ready (${STEPS[*]}); build plugins with scripts/build-plugins.sh" >&2
