#!/usr/bin/env bash
# Hot-reload walkthrough: add, change, break and remove a plugin while the host
# runs against the embedded simulator, printing what the host logs at each step.
#
#   examples/hot-reload/walkthrough.sh
#
# Needs target/plugins/restart-alarm.wasm (scripts/build-plugins.sh restart-alarm).
# Works in a temporary config directory; the repository is not modified.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/examples/hot-reload"
BIN="${WASM_INFORMER:-$ROOT/target/debug/wasm-informer}"
WASM="$ROOT/target/plugins/restart-alarm.wasm"

[ -f "$WASM" ] || { echo "missing $WASM: run scripts/build-plugins.sh restart-alarm" >&2; exit 1; }
[ -x "$BIN" ] || (cd "$ROOT" && cargo build -p wasm-informer)

DIR="$(mktemp -d)"
mkdir -p "$DIR/plugins" "$DIR/wasm"
cp "$WASM" "$DIR/wasm/alarm.wasm"
cat > "$DIR/host.toml" <<TOML
metrics_addr = "127.0.0.1:0"
cache_dir = "$ROOT/target/wasm-cache"
[sim]
pods = 200
churn_per_second = 20
TOML
LOG="$DIR/host.log"

: > "$LOG"
"$BIN" run --config "$DIR" --sim --status never --report "$DIR/report.json" 2> "$LOG" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true' EXIT

# Waits until the log has a new line matching $1 and prints it.
SEEN=0
wait_for() {
    for _ in $(seq 1 600); do
        local hit
        hit="$(tail -n +"$((SEEN + 1))" "$LOG" | grep -n -m1 -E "$1" || true)"
        if [ -n "$hit" ]; then
            SEEN=$((SEEN + ${hit%%:*}))
            echo "    log: ${hit#*:}"
            return 0
        fi
        sleep 0.1
    done
    echo "timed out waiting for /$1/; log in $LOG" >&2
    exit 1
}
# Replaces a file atomically, as deploy tools do.
put() { cp "$1" "$2.tmp" && mv "$2.tmp" "$2"; }

wait_for "running 0 plugin"
echo "1. add plugins/alarm.toml: the plugin starts (its informer too) and gets the replay"
put "$HERE/staged/alarm.toml" "$DIR/plugins/alarm.toml"
wait_for "plugin loaded.*plugin=alarm"

echo "2. change it (threshold 5 -> 3): the new version takes over, replay first, no gap"
put "$HERE/staged/alarm-v2.toml" "$DIR/plugins/alarm.toml"
wait_for "new version took over"

echo "3. overwrite the component with garbage: rejected, the old version keeps running"
printf 'not a component' > "$DIR/wasm/alarm.wasm.tmp" && mv "$DIR/wasm/alarm.wasm.tmp" "$DIR/wasm/alarm.wasm"
wait_for "reload rejected"

echo "4. remove the manifest: the plugin stops, and the informer nobody uses any more"
rm "$DIR/plugins/alarm.toml"
wait_for "informer stopped"
wait_for "plugin removed"

echo "5. SIGTERM: graceful shutdown writes the report"
kill -TERM "$PID"
wait "$PID"
trap - EXIT
python3 - "$DIR/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for e in r["reloads"]:
    print(f"    reload: {e['action']:8} {e.get('plugin', '')} {e.get('error', '')[:100]}")
a = r["plugins"]["alarm"]
print(f"    alarm: state={a['state']} versions={a['versions']} replayed={a['replayed']} delivered={a['delivered']}")
PY
echo "full log: $LOG"
