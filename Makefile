# boxwire — every workflow is a target here. `make demo` and `make test` do
# their own set-up on a bare Debian machine (as root): they install and start
# a Docker engine when none answers and build the base image locally when no
# registry answers.

SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
IMAGE ?= boxwire:latest
LDFLAGS := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
E2E_TIMEOUT ?= 30m
IMAGE_LABELS := --label org.opencontainers.image.version=$(VERSION) --label io.boxwire.agent.version=$(VERSION)

export BOXWIRE_IMAGE := $(IMAGE)

.PHONY: all build agent image engine test unit e2e security lint demo bench bench-compare stress clean sdk-typescript sdk-python web kube test-k8s k8s-up k8s-down bridge-image bench-k8s

all: build

## build: the host binaries (bridge, client, scripted model server) and the agent
build: agent
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o build/bridge ./bridge
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o build/client ./client
	$(GO) build -trimpath -o build/llmscript ./e2e/cmd/llmscript

## agent: the static agent binary that goes into the image. Without net/http's
## HTTP/2 (AGENT_TAGS): every connection the agent serves or makes is HTTP/1.1
## (the bridge's WebSocket, the LLM proxy's unix socket, a standalone model
## endpoint), and HTTP/2's code was 0.3 MiB of its idle RSS (BENCHMARKS.md).
## Beside it, its hash (image/agent-hash.sh), which the agent then need not
## compute at every start
AGENT_TAGS := nethttpomithttp2
agent:
	CGO_ENABLED=0 $(GO) build -trimpath -tags '$(AGENT_TAGS)' -ldflags '$(LDFLAGS)' -o build/image/boxwire-agent ./agent
	@GO=$(GO) bash image/agent-hash.sh build/image/boxwire-agent

## engine: make sure a Docker engine answers (installs and starts one if not)
engine:
	@bash image/engine.sh

## image: the sandbox image, on a local base when no registry answers
image: engine agent
	@base=$$(bash image/base-image.sh) && \
	  echo "image: $(IMAGE) on $$base" && \
	  docker build -q --build-arg BASE=$$base $(IMAGE_LABELS) -t $(IMAGE) . 2>&1 >/dev/null | \
	    { grep -vE 'DEPRECATED|buildx|BuildKit|^ *$$' || true; } ; exit $${PIPESTATUS[0]}

## lint: gofmt, go vet, staticcheck
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## unit: every package's tests with the race detector, the engine tests
## included (BOXWIRE_ENGINE_TESTS=1: they need the engine and, for
## bridge/sandbox, the base image; plain `go test ./...` skips them)
unit: image
	BOXWIRE_ENGINE_TESTS=1 BOXWIRE_PG_TESTS=1 $(GO) test -race -count=1 ./...
	$(GO) test -run '^$$' -fuzz '^FuzzReadMessage$$' -fuzztime 200000x -fuzzminimizetime 2000x ./bridge/wire

## e2e: end-to-end tests on the real engine with the real image
e2e: image
	BOXWIRE_E2E=1 $(GO) test -race -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/... 2>&1 | \
	  awk -f e2e/filter.awk ; exit $${PIPESTATUS[0]}

## security: the security e2e tests alone, under runc and gVisor's runsc (make e2e runs them too)
security: image
	BOXWIRE_E2E=1 $(GO) test -race -count=1 -timeout $(E2E_TIMEOUT) -v -run '^(TestSecurity|TestThreadUnderRunsc)' ./e2e/ 2>&1 | \
	  awk -f e2e/filter.awk ; exit $${PIPESTATUS[0]}

## kube: the Kubernetes e2e tests (e2e/kube, docs/kubernetes.md) on a real
## single-node cluster they start and stop (e2e/kube/cluster/up.sh and
## down.sh; the binaries are built once into /var/cache/boxwire-k8s: about
## 30 minutes the first time on two cores, then cached), with $(IMAGE) in it
kube: image
	BOXWIRE_K8S_TESTS=1 $(GO) test -race -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/kube/ 2>&1 | \
	  awk -f e2e/filter.awk ; exit $${PIPESTATUS[0]}
test-k8s: kube

## k8s-up, k8s-down: start that cluster with $(IMAGE) imported (prints its
## kubeconfig; BOXWIRE_KUBECONFIG=... make kube then uses it), and stop it
k8s-up: image
	@K8S_IMAGES=$(IMAGE) bash e2e/kube/cluster/up.sh
k8s-down:
	@bash e2e/kube/cluster/down.sh

## bridge-image: the bridge's own image for running it in a cluster
## (bridge/sandbox/kube/deploy: Dockerfile, bridge.yaml; docs/kubernetes.md)
BRIDGE_IMAGE ?= boxwire-bridge:latest
bridge-image: image
	@ctx=$$(mktemp -d) && trap 'rm -rf "$$ctx"' EXIT && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o "$$ctx/bridge" ./bridge && \
	  echo "bridge-image: $(BRIDGE_IMAGE) (CA certificates from $(IMAGE))" && \
	  docker build -q --build-arg BASE=$(IMAGE) -t $(BRIDGE_IMAGE) -f bridge/sandbox/kube/deploy/Dockerfile "$$ctx" >/dev/null

## bench-k8s: the pod-backed new-thread figures (cold and from the warm
## pool, beside a bare pod) on the test cluster (started and stopped as
## make kube does, or BOXWIRE_KUBECONFIG's)
bench-k8s: image
	BOXWIRE_K8S_TESTS=1 BOXWIRE_BENCH=1 $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -v -run '^TestKubeBench' ./e2e/kube/ 2>&1 | \
	  grep -E 'BENCH|FAIL|^ok|e2e/kube' ; exit $${PIPESTATUS[0]}

## stress: the unit suite RUNS times (default 10), every other run under CPU load, to find flaky tests
stress: engine
	@bash .ci/stress

## sdk-typescript: the TypeScript SDK (client/typescript): npm ci, strict tsc,
## and its tests (node --test) against a real bridge, engine and image
sdk-typescript: image build
	cd client/typescript && npm ci --no-audit --no-fund && npm run check && npm test

## test: lint, unit tests, the e2e suite, the SDKs' tests, the web page's and the Kubernetes ones
test: lint unit e2e sdk-typescript sdk-python web kube

## web: the browser page (bridge/web, docs/web.md): npm ci, strict tsc, the
## committed bundle is up to date, and its tests in Debian's Chromium
## (installed when missing) against a real bridge and $(IMAGE)
web: image build
	@{ test -x /usr/bin/chromium && command -v openssl >/dev/null; } || \
	  bash image/apt.sh install chromium openssl
	cd bridge/web && npm ci --no-audit --no-fund && npm run check && npm run check-bundle && BOXWIRE_IMAGE=$(IMAGE) npm test

## sdk-python: the Python SDK (client/python) in a venv under build/: ruff,
## mypy --strict and pytest against a real bridge and $(IMAGE)
PYVENV := build/pyvenv
sdk-python: image build
	@python3 -c 'import ensurepip, venv' 2>/dev/null || \
	  bash image/apt.sh install python3-venv
	@test -x $(PYVENV)/bin/pip || python3 -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q -e 'client/python[deepagents,dev]'
	cd client/python && ../../$(PYVENV)/bin/ruff check src tests examples && ../../$(PYVENV)/bin/ruff format --check src tests examples
	cd client/python && ../../$(PYVENV)/bin/mypy
	cd client/python && BOXWIRE_IMAGE=$(IMAGE) BOXWIRE_SDK_SKIP_BUILD=1 ../../$(PYVENV)/bin/pytest -q -p no:cacheprovider

## demo: build everything, start the bridge and run a short chat through the client
demo: image build
	@bash e2e/demo.sh

## bench: speed and memory figures side by side with Docker's own paths and a
## reference PTY bridge (REFBENCH, built into build/, not part of boxwire)
## (BENCHMARKS.md); the table, and the results as JSON in BENCH_JSON
## (default build/bench-DATE-TIME.json; the path is printed)
REFBENCH ?= ../shared/bench
BENCH_JSON ?= build/bench-$(shell date -u +%Y%m%d-%H%M%S).json
bench: image build
	cd $(REFBENCH) && GOFLAGS=-mod=mod $(GO) build -o $(CURDIR)/build/ ./ptyws
	BOXWIRE_E2E=1 BOXWIRE_BENCH=1 BOXWIRE_REF_PTYWS=$(CURDIR)/build/ptyws BOXWIRE_BENCH_JSON=$(abspath $(BENCH_JSON)) \
	  $(GO) test -v -count=1 -timeout 60m -run '^TestBenchmarks$$' ./e2e/ 2>&1 | \
	  grep -vE '^(=== |--- |PASS|ok )' ; exit $${PIPESTATUS[0]}

## bench-compare: each figure's change from OLD to NEW, runs of make bench
## (JSON; several a side: OLD='build/bench-a.json build/bench-b.json'),
## with the spread of its samples and whether the change is beyond it
bench-compare:
	@test -n "$(OLD)" -a -n "$(NEW)" || { echo "usage: make bench-compare OLD=build/bench-A.json NEW=build/bench-B.json" >&2; exit 2; }
	@$(GO) run ./e2e/cmd/benchcmp -old '$(OLD)' -new '$(NEW)'

clean:
	rm -rf build
