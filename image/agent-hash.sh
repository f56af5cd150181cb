#!/bin/bash
# agent-hash.sh BINARY — writes BINARY.sha256: "<Go build ID> sha256:<hex>",
# the agent binary's hash for its hello (wire.Hello.AgentHash). The agent
# reads it instead of hashing its 8 MiB at every start, and only when the
# build ID it names is its own (agent/cli/selfhash.go); `make agent` runs
# it and the Dockerfile copies the file beside the binary.
set -euo pipefail
bin=$1
id=$(${GO:-go} tool buildid "$bin")
sum=$(sha256sum "$bin" | cut -d' ' -f1)
printf '%s sha256:%s\n' "$id" "$sum" >"$bin.sha256.tmp"
mv "$bin.sha256.tmp" "$bin.sha256"
