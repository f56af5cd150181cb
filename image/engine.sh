#!/usr/bin/env bash
# engine.sh makes sure a Docker engine answers on this machine. On a bare
# Debian machine (as root) it installs Debian's docker.io, clears a stale pid
# file and starts dockerd in the background, logging to $BOXWIRE_ENGINE_LOG.
# It is idempotent: an engine that already answers is left alone.
set -euo pipefail

log=${BOXWIRE_ENGINE_LOG:-/var/log/boxwire-dockerd.log}

answers() { timeout 10 docker info >/dev/null 2>&1; }

if answers; then
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "engine: installing docker.io (Debian package)" >&2
  bash "$(dirname "$0")/apt.sh" install docker.io
fi

# A session's processes end without cleanup: a pid file may name a dead process.
for f in /var/run/docker.pid /run/docker/containerd/containerd.pid; do
  if [ -f "$f" ] && ! kill -0 "$(cat "$f")" 2>/dev/null; then
    rm -f "$f"
  fi
done

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "engine: starting dockerd (log: $log)" >&2
  nohup dockerd >"$log" 2>&1 </dev/null &
fi

for _ in $(seq 1 120); do
  if answers; then
    echo "engine: ready" >&2
    exit 0
  fi
  sleep 0.5
done
echo "engine: dockerd did not answer within 60s; last lines of $log:" >&2
tail -n 30 "$log" >&2 || true
exit 1
