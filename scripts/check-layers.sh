#!/usr/bin/env bash
# The crate layers, as the compiler keeps them: the informer (kube-informer)
# depends on nothing of wasmtime, and the plugin runtime
# (wasm-informer-runtime) on nothing of kube-client or hyper. Fails naming
# the crate and the dependency that crossed a layer.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
check() {
    local crate=$1 forbidden=$2
    local deps
    deps=$(cargo tree -p "$crate" -e normal,build --prefix none --format '{p}' | awk '{print $1}' | sort -u)
    if grep -qx "$forbidden" <<<"$deps"; then
        echo "check-layers: $crate depends on $forbidden:" >&2
        cargo tree -p "$crate" -e normal,build -i "$forbidden" >&2 || true
        fail=1
    fi
}
check kube-informer wasmtime
check kube-informer wasmtime-wasi
check wasm-informer-runtime kube-client
check wasm-informer-runtime kube
check wasm-informer-runtime hyper
check wasm-informer-runtime reqwest
if [ "$fail" = 0 ]; then
    echo "check-layers: kube-informer has no wasmtime; wasm-informer-runtime has no kube-client or hyper"
fi
exit "$fail"
