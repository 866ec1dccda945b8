#!/usr/bin/env bash
# Third-party client conformance suite: runs the official Python client (PyPI kubernetes,
# pinned in python/requirements.txt) and @kubernetes/client-node (pinned in
# node/package-lock.json) against the server of a kubeconfig.
#
#   apisim/conformance/run.sh KUBECONFIG
#
# Exit status: 0 when every check passed, 1 when a check failed, 3 when a tool is missing (the
# message names the install command). The checks that inject faults use apisim's /_sim/
# endpoints and are skipped against a server without them.
#
# Tools, as scripts/setup.sh installs them:
#   python: $APISIM_CONFORMANCE_PYTHON, else apisim/conformance/python/.venv/bin/python
#   node:   node (18 or newer) with apisim/conformance/node/node_modules (npm ci)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBECONFIG_FILE="${1:-}"
if [ -z "$KUBECONFIG_FILE" ] || [ ! -r "$KUBECONFIG_FILE" ]; then
    echo "usage: $0 KUBECONFIG (a readable kubeconfig file)" >&2
    exit 2
fi

PY="${APISIM_CONFORMANCE_PYTHON:-$HERE/python/.venv/bin/python}"
missing=0
if [ ! -x "$PY" ] || ! "$PY" -c 'import kubernetes' >/dev/null 2>&1; then
    echo "conformance: error: no Python with the kubernetes package at $PY." >&2
    echo "  install it with: scripts/setup.sh   (or: python3 -m venv $HERE/python/.venv && $HERE/python/.venv/bin/pip install -r $HERE/python/requirements.txt)" >&2
    missing=1
fi
if ! command -v node >/dev/null 2>&1; then
    echo "conformance: error: node is not installed; install it with: apt-get install -y nodejs npm" >&2
    missing=1
elif [ ! -d "$HERE/node/node_modules/@kubernetes/client-node" ]; then
    echo "conformance: error: @kubernetes/client-node is not installed." >&2
    echo "  install it with: scripts/setup.sh   (or: cd $HERE/node && npm ci)" >&2
    missing=1
fi
if [ "$missing" -ne 0 ]; then
    exit 3
fi

failed=0
run() {
    local name="$1"
    shift
    local start=$SECONDS
    echo "conformance: == $name =="
    if "$@"; then
        echo "conformance: $name passed ($((SECONDS - start)) s)"
    else
        echo "conformance: $name FAILED ($((SECONDS - start)) s)"
        failed=$((failed + 1))
    fi
}

run "python (kubernetes $("$PY" -c 'import kubernetes; print(kubernetes.__version__)'))" \
    "$PY" "$HERE/python/conformance.py" "$KUBECONFIG_FILE"
run "node ($(node -p "require('$HERE/node/node_modules/@kubernetes/client-node/package.json').version") on node $(node --version))" \
    node "$HERE/node/conformance.mjs" "$KUBECONFIG_FILE"

if [ "$failed" -ne 0 ]; then
    echo "conformance: $failed of 2 client suites failed"
    exit 1
fi
echo "conformance: both client suites passed"
