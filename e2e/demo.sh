#!/usr/bin/env bash
# demo.sh starts a bridge (with the scripted model server unless
# OPENAI_API_KEY is set) and runs one chat through the client, printing it.
# `make demo` builds the binaries and the image first.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/bwdemo.XXXXXX)
export BOXWIRE_BRIDGE_ID="demo-$RANDOM$RANDOM"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # A stopped bridge leaves its sandboxes for the next start to adopt; the
  # demo's bridge does not come back, so remove everything it made.
  build/bridge gc --id "$BOXWIRE_BRIDGE_ID" --data-dir "$work/data" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# wait_for FILE PATTERN: print the first match of PATTERN in FILE (30 s at most).
wait_for() {
  for _ in $(seq 1 300); do
    if m=$(grep -oE "$2" "$1" 2>/dev/null | head -n 1) && [ -n "$m" ]; then echo "$m"; return 0; fi
    sleep 0.1
  done
  echo "demo: timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}

if [ -z "${OPENAI_API_KEY:-}" ]; then
  echo "demo: no OPENAI_API_KEY, so the model is the scripted stand-in (e2e/testdata/demo-script.json)"
  export OPENAI_API_KEY="demo-key-$RANDOM$RANDOM"
  build/llmscript --script e2e/testdata/demo-script.json --listen 127.0.0.1:0 \
    --api-key "$OPENAI_API_KEY" >"$work/llm.log" 2>&1 &
  pids+=($!)
  OPENAI_BASE_URL=$(wait_for "$work/llm.log" 'http://[0-9.:]+/v1')
  export OPENAI_BASE_URL BOXWIRE_MODEL=scripted
else
  echo "demo: using ${OPENAI_BASE_URL:-https://api.openai.com/v1} with model ${BOXWIRE_MODEL:-gpt-4o-mini}"
fi

export BOXWIRE_TOKEN="demo-$RANDOM$RANDOM$RANDOM"
export BOXWIRE_DATA_DIR="$work/data"
export BOXWIRE_IMAGE=${BOXWIRE_IMAGE:-boxwire:latest}
build/bridge --listen 127.0.0.1:0 2>"$work/bridge.log" &
pids+=($!)
addr=$(wait_for "$work/bridge.log" 'listening on http://[0-9.:]+' | sed 's|listening on http://||')
echo "demo: bridge on $addr (image $BOXWIRE_IMAGE); chatting through the client:"
echo

message=${DEMO_MESSAGE:-"hello! please write hello into /workspace/x and show me the file"}
echo "> $message"
status=0
build/client --url "ws://$addr/v1/ws" --token "$BOXWIRE_TOKEN" -m "$message" || status=$?
echo
if [ "$status" -ne 0 ]; then
  echo "demo: the client exited with $status; bridge log:" >&2
  tail -n 40 "$work/bridge.log" >&2
fi
exit "$status"
