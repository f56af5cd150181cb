#!/usr/bin/env bash
# base-image.sh prints the name of a Debian bookworm base image that the
# engine has, making one when needed: the official debian:bookworm-slim when a
# registry answers, otherwise a local debootstrap (minbase) imported as
# boxwire-base:bookworm. Progress goes to stderr; only the name goes to stdout.
set -euo pipefail

official=debian:bookworm-slim
local_name=boxwire-base:bookworm
mirror=${BOXWIRE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

has() { docker image inspect "$1" >/dev/null 2>&1; }

for name in "$official" "$local_name"; do
  if has "$name"; then echo "$name"; exit 0; fi
done

if timeout 30 docker pull -q "$official" >/dev/null 2>&1; then
  echo "$official"; exit 0
fi

echo "base: no registry answers; building $local_name with debootstrap" >&2
if ! command -v debootstrap >/dev/null 2>&1; then
  bash "$(dirname "$0")/apt.sh" install debootstrap
fi
dir=$(mktemp -d /var/tmp/boxwire-base.XXXXXX)
trap 'rm -rf "$dir"' EXIT
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.log" 2>&1 ||
  { tail -n 20 "$dir.log" >&2; exit 1; }
rm -f "$dir.log"
# Trim what a container never needs, as the slim image does.
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
tar -C "$dir" -c . | docker import \
  -c 'CMD ["bash"]' -c 'ENV LANG=C.UTF-8' - "$local_name" >/dev/null
echo "$local_name"
