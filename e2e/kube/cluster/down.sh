#!/usr/bin/env bash
# e2e/kube/cluster/down.sh — stop the cluster e2e/kube/cluster/up.sh started and leave the machine as
# it was: every pod deleted (the kubelet tears their sandboxes down), the
# processes it started ended by their recorded pids, leftover containers
# of its private containerd removed, its mounts undone, the network
# namespace and veth gone, the host sysctls the kubelet changed put back.
# The binaries and the Go build cache stay (K8S_CACHE). With K8S_KEEP=1 the
# state folder stays too (certificates, etcd), else it is removed.
set -uo pipefail

S=${K8S_STATE:-/var/lib/boxwire-k8s}
NS=boxwire-k8s
NODE_IP=10.250.0.2
P=$S/pki
log() { echo "kube cluster down: $*" >&2; }
[ -d "$S" ] || exit 0

running() { [ -f "$S/pids/$1" ] && kill -0 "$(cat "$S/pids/$1")" 2>/dev/null; }
stop() { # name: TERM, then KILL after 10 s
  running "$1" || { rm -f "$S/pids/$1"; return 0; }
  local pid; pid=$(cat "$S/pids/$1")
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$S/pids/$1"
}
api() { curl -fsS --max-time 10 --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "$@"; }
CTR="ctr -a $S/containerd.sock -n k8s.io"

# Pods first, while the kubelet still runs: it stops their sandboxes. The
# bridge's finalizer would keep a pod's object: it is taken off.
names() { python3 -c 'import json,sys; [print(i["metadata"].get("namespace",""), i["metadata"]["name"]) for i in json.load(sys.stdin)["items"]]'; }
A=https://$NODE_IP:6443
if running kube-apiserver && running kubelet; then
  api "$A/api/v1/pods" | names | while read -r ns name; do
    api -X PATCH -H 'Content-Type: application/merge-patch+json' -d '{"metadata":{"finalizers":null}}' \
      "$A/api/v1/namespaces/$ns/pods/$name" >/dev/null 2>&1
    api -X DELETE "$A/api/v1/namespaces/$ns/pods/$name?gracePeriodSeconds=0" >/dev/null 2>&1
  done
  for _ in $(seq 150); do
    [ -z "$($CTR containers ls -q 2>/dev/null)" ] && break; sleep 0.2
  done
fi
for p in kubelet provisioner kube-scheduler kube-controller-manager; do stop $p; done
# Whatever the kubelet left in containerd goes.
if running containerd; then
  for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  for _ in $(seq 25); do [ -z "$($CTR tasks ls 2>/dev/null | awk 'NR>1 && $3=="RUNNING"')" ] && break; sleep 0.2; done
  for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks rm -f "$t" >/dev/null 2>&1; done
  for c in $($CTR containers ls -q 2>/dev/null); do $CTR containers rm "$c" >/dev/null 2>&1; done
fi
stop containerd
stop kube-apiserver
stop etcd

# Mounts under the state folder (emptyDirs, volumes, snapshots), deepest first.
awk -v s="$S" '$2 == s || index($2, s "/") == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null
done
# Pod network namespaces the CRI made (recorded by e2e/kube/cluster/up.sh as cni-*).
for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-'); do
  if [ -f "$S/netns.before" ] && grep -qx "$n" "$S/netns.before"; then continue; fi
  ip netns delete "$n" 2>/dev/null
done
ip link delete bwk8s0 2>/dev/null
ip netns delete $NS 2>/dev/null

if [ -f "$S/sysctl.saved" ]; then
  while IFS= read -r kv; do sysctl -q -w "$kv" >/dev/null 2>&1 || log "could not restore $kv"; done <"$S/sysctl.saved"
  rm -f "$S/sysctl.saved"
fi
if [ "${K8S_KEEP:-0}" != 1 ]; then
  rm -rf "$S"
fi
log "cluster down"
