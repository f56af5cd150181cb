#!/usr/bin/env bash
# e2e/kube/cluster/build.sh — build kube-apiserver, kubelet, kube-scheduler and
# kube-controller-manager (PersistentVolume binding, ServiceAccounts) from the Go
# module proxy into a cache directory, once. A rerun with the binaries there
# takes no time; with them gone but the Go build cache warm, seconds.
#
#   K8S_VERSION (default v1.37.2)  K8S_CACHE (default /var/cache/boxwire-k8s)
#
# Prints the directory holding the binaries on its last line.
set -euo pipefail

version=${K8S_VERSION:-v1.37.2}
cache=${K8S_CACHE:-/var/cache/boxwire-k8s}
bin=$cache/bin/$version
src=$cache/src/$version
go=${GO:-go}
cmds=(kube-apiserver kubelet kube-scheduler kube-controller-manager)

have=1
for c in "${cmds[@]}"; do [ -x "$bin/$c" ] || have=0; done
if [ "$have" = 1 ]; then echo "$bin"; exit 0; fi

mkdir -p "$bin" "$src"
staging=${version/#v1./v0.}   # k8s.io/X staging modules are tagged v0.N.P
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}

# The wrapper module: require k8s.io/kubernetes and replace every staging
# module (its go.mod points them at ./staging, which a module cannot use).
# (Through the go command, so that GOPROXY is honoured.)
gomod=$(cd "$src" && GOFLAGS=-mod=mod "$go" mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
mods=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$gomod")
[ -n "$mods" ] || { echo "e2e/kube/cluster/build.sh: no staging modules in k8s.io/kubernetes $version's go.mod" >&2; exit 1; }
{
  echo "module boxwire.local/k8sbuild"
  echo
  echo "go 1.25"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  for m in $mods; do echo "	$m => $m $staging"; done
  echo ")"
} >"$src/go.mod"
{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  echo "import ("
  for c in "${cmds[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
  echo ")"
} >"$src/tools.go"

cd "$src"
GOFLAGS=-mod=mod "$go" mod tidy   # seconds once the module cache has it
ld="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ld="$ld -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
ld="$ld -X k8s.io/component-base/version.gitTreeState=clean"
pkgs=()
for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
start=$(date +%s)
CGO_ENABLED=0 "$go" build -trimpath -ldflags "$ld" -o "$bin.tmp/" "${pkgs[@]}"
mv "$bin.tmp"/* "$bin"/ && rmdir "$bin.tmp"
echo "e2e/kube/cluster/build.sh: built ${cmds[*]} $version in $(( $(date +%s) - start )) s" >&2
echo "$bin"
