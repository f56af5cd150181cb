#!/usr/bin/env bash
# e2e/kube/cluster/up.sh — start a real single-node Kubernetes cluster on this machine for
# the Kubernetes tests (docs/kubernetes.md, ../shared/KUBERNETES.md):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, a private
# containerd (never dockerd's) and the kubelet, all inside a network
# namespace the script makes (veth 10.250.0.1 on the host, 10.250.0.2 in
# it), so all traffic stays between things it started. Pods get a dummy
# eth0 connected to nothing (e2e/kube/cluster/cni-dummy). A volume provisioner
# (e2e/kube/cluster/provisioner) serves the StorageClass boxwire-test.
#
#   K8S_STATE (default /var/lib/boxwire-k8s)  K8S_CACHE (e2e/kube/cluster/build.sh)
#   K8S_IMAGES: docker images to import (default $IMAGE or boxwire:latest)
#
# Installs what is missing (Debian packages, the binaries: e2e/kube/cluster/build.sh).
# Writes $K8S_STATE/kubeconfig (cluster admin) and prints its path. Safe to
# run again: a cluster already up is only given the images again.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
S=${K8S_STATE:-/var/lib/boxwire-k8s}
cache=${K8S_CACHE:-/var/cache/boxwire-k8s}
NS=boxwire-k8s
HOST_IP=10.250.0.1
NODE_IP=10.250.0.2
NODE=boxwire-node
images=${K8S_IMAGES:-${IMAGE:-boxwire:latest}}
log() { echo "kube cluster up: $*" >&2; }

mkdir -p "$S"/{pids,logs,pki,cni/bin,cni/net.d,pv,etcd} "$cache"
inns() { nsenter --net=/run/netns/$NS "$@"; }

# --- packages: etcd and the CNI loopback plugin, unpacked (no services) ---
debroot=$cache/debroot
if [ ! -x "$debroot/usr/bin/etcd" ] || [ ! -x "$debroot/usr/lib/cni/loopback" ]; then
  log "fetching etcd-server and containernetworking-plugins"
  command -v apt-get >/dev/null || { log "needs apt-get"; exit 1; }
  (cd "$cache" && bash "$here/../../../image/apt.sh" download etcd-server containernetworking-plugins)
  for d in "$cache"/etcd-server_*.deb "$cache"/containernetworking-plugins_*.deb; do dpkg -x "$d" "$debroot"; done
fi
missing=()
for tp in containerd:containerd ctr:containerd runc:runc openssl:openssl nsenter:util-linux ip:iproute2 curl:curl; do
  command -v "${tp%%:*}" >/dev/null || missing+=("${tp#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  bash "$here/../../../image/apt.sh" install "${missing[@]}"
fi
command -v docker >/dev/null || { log "docker is missing: make engine installs it"; exit 1; }
bin=$(bash "$here/build.sh")
GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -trimpath -o "$cache/provisioner" "$here/provisioner"
cp "$debroot/usr/lib/cni/loopback" "$here/cni-dummy" "$S/cni/bin/"
cat >"$S/cni/net.d/10-boxwire.conflist" <<JSON
{"cniVersion":"1.0.0","name":"boxwire-none","plugins":[{"type":"cni-dummy"}]}
JSON

running() { [ -f "$S/pids/$1" ] && kill -0 "$(cat "$S/pids/$1")" 2>/dev/null; }
start() { # name cmd...: start cmd in the namespace, in its own session
  local name=$1; shift
  running "$name" && return 0
  setsid nsenter --net=/run/netns/$NS "$@" >"$S/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$S/pids/$name"
}
waitfor() { # what seconds cmd...
  local what=$1 secs=$2; shift 2
  for _ in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  log "$what did not come up in ${secs}s; its log:"; tail -20 "$S/logs/$what.log" >&2 || true; exit 1
}

# --- network namespace (and the ones there before, which down.sh keeps) ---
[ -f "$S/netns.before" ] || ip netns list 2>/dev/null | awk '{print $1}' >"$S/netns.before"
if [ ! -e /run/netns/$NS ]; then
  ip netns add $NS
  ip link add bwk8s0 type veth peer name bwk8s1
  ip link set bwk8s1 netns $NS
  ip addr add $HOST_IP/30 dev bwk8s0 && ip link set bwk8s0 up
  inns ip addr add $NODE_IP/30 dev bwk8s1
  inns ip link set bwk8s1 up && inns ip link set lo up
fi

# --- the kubelet's host sysctls, saved once to be put back by down.sh ---
if [ ! -f "$S/sysctl.saved" ]; then
  for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
    echo "$k=$(sysctl -n $k)"
  done >"$S/sysctl.saved"
fi

# --- certificates ---
P=$S/pki
if [ ! -f "$P/admin.crt" ]; then
  log "making certificates"
  o() { openssl "$@" 2>/dev/null; }
  o req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=boxwire-test-ca -keyout "$P/ca.key" -out "$P/ca.crt"
  cert() { # name subject [san]
    o req -newkey rsa:2048 -nodes -subj "$2" -keyout "$P/$1.key" -out "$P/$1.csr"
    if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" >"$P/$1.ext"; else : >"$P/$1.ext"; fi
    o x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 -extfile "$P/$1.ext" -out "$P/$1.crt"
  }
  cert apiserver /CN=kube-apiserver "IP:$NODE_IP,IP:127.0.0.1,IP:10.251.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=boxwire-admin"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE"
  o genrsa -out "$P/sa.key" 2048
  o rsa -in "$P/sa.key" -pubout -out "$P/sa.pub"
fi
kubeconfig() { # file user
  cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: boxwire, cluster: {server: "https://$NODE_IP:6443", certificate-authority: "$P/ca.crt"}}]
users: [{name: $2, user: {client-certificate: "$P/$2.crt", client-key: "$P/$2.key"}}]
contexts: [{name: boxwire, context: {cluster: boxwire, user: $2, namespace: default}}]
current-context: boxwire
YAML
}
kubeconfig "$S/kubeconfig" admin
kubeconfig "$S/kubelet.kubeconfig" kubelet

# --- etcd, the control plane ---
start etcd "$debroot/usr/bin/etcd" --data-dir "$S/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380
start kube-apiserver "$bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
  --bind-address $NODE_IP --advertise-address $NODE_IP --secure-port 6443 \
  --service-cluster-ip-range 10.251.0.0/24 --allow-privileged=false --profiling=false \
  --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
  --kubelet-client-certificate "$P/admin.crt" --kubelet-client-key "$P/admin.key" \
  --kubelet-preferred-address-types InternalIP \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$P/sa.pub" \
  --service-account-signing-key-file "$P/sa.key" --authorization-mode Node,RBAC
api() { curl -fsS --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://$NODE_IP:6443$1"; }
waitfor kube-apiserver 90 api /readyz
start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$S/kubeconfig" \
  --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" --use-service-account-credentials=false \
  --bind-address 127.0.0.1 --leader-elect=false --controllers '*'
start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$S/kubeconfig" --bind-address 127.0.0.1 --leader-elect=false
start provisioner "$cache/provisioner" --kubeconfig "$S/kubeconfig" --dir "$S/pv"

# --- the private containerd ---
# Its containers' base OCI spec is containerd's default plus a pids limit
# on each container's own cgroup: the kubelet's podPidsLimit sits on the
# pod's cgroup, above the container, where the agent's posture report
# cannot see it (docs/kubernetes.md).
ctr oci spec | python3 -c 'import json,sys; s=json.load(sys.stdin); s["linux"].setdefault("resources",{})["pids"]={"limit":512}; json.dump(s,sys.stdout)' >"$S/base-spec.json"
cat >"$S/containerd.toml" <<TOML
version = 2
root = "$S/containerd/root"
state = "$S/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$S/containerd.sock"
[ttrpc]
  address = "$S/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$S/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/boxwire-pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$S/base-spec.json"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$S/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$S/cni/bin"
    conf_dir = "$S/cni/net.d"
TOML
start containerd containerd --config "$S/containerd.toml"
CTR="ctr -a $S/containerd.sock -n k8s.io"
waitfor containerd 30 $CTR version

# --- images: the pause image, then the ones asked for ---
if ! $CTR images ls -q | grep -qx docker.io/library/boxwire-pause:1; then
  if ! docker image inspect boxwire-pause:1 >/dev/null 2>&1; then
    ctx=$(mktemp -d)
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/pause" "$here/pause"
    printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
    docker build -q -t boxwire-pause:1 "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  docker save boxwire-pause:1 | $CTR images import - >/dev/null
fi
for img in $images; do
  id=$(docker image inspect -f '{{.Id}}' "$img")
  ref=$img; case $ref in */*) ;; *) ref=docker.io/library/$ref;; esac
  if [ "$($CTR images ls "name==$ref" -q 2>/dev/null | head -1)" = "$ref" ] && [ -f "$S/image-$(echo "$img" | tr '/:' '__')" ] &&
     [ "$(cat "$S/image-$(echo "$img" | tr '/:' '__')")" = "$id" ]; then
    continue
  fi
  log "importing $img"
  docker save "$img" | $CTR images import - >/dev/null
  echo "$id" >"$S/image-$(echo "$img" | tr '/:' '__')"
done

# --- the kubelet ---
cat >"$S/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$S/containerd.sock
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: "$P/ca.crt"}}
authorization: {mode: AlwaysAllow}
podPidsLimit: 512
failSwapOn: false
serializeImagePulls: false
podLogsDir: "$S/pod-logs"
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
YAML
start kubelet "$bin/kubelet" --config "$S/kubelet.yaml" --kubeconfig "$S/kubelet.kubeconfig" \
  --root-dir "$S/kubelet" --cert-dir "$S/kubelet/pki" --node-ip $NODE_IP --hostname-override $NODE
ready() { api /api/v1/nodes/$NODE | grep -q '"type": *"Ready", *"status": *"True"' ||
          api /api/v1/nodes/$NODE | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'; }
waitfor kubelet 90 ready

# --- the StorageClass and the default ServiceAccount ---
sc='{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"boxwire-test","annotations":{"storageclass.kubernetes.io/is-default-class":"true"}},"provisioner":"boxwire.test/hostpath","reclaimPolicy":"Retain","volumeBindingMode":"Immediate"}'
api /apis/storage.k8s.io/v1/storageclasses/boxwire-test >/dev/null 2>&1 ||
  curl -fsS --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" -H 'Content-Type: application/json' \
    -d "$sc" "https://$NODE_IP:6443/apis/storage.k8s.io/v1/storageclasses" >/dev/null
waitfor kube-controller-manager 60 api /api/v1/namespaces/default/serviceaccounts/default
log "cluster up: KUBECONFIG=$S/kubeconfig"
echo "$S/kubeconfig"
