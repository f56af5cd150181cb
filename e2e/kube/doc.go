// Package kube holds the end-to-end tests of sandboxes on Kubernetes
// (docs/kubernetes.md): a real single-node cluster (e2e/kube/cluster/up.sh, started by
// TestMain and stopped after the run), the real boxwire image imported into
// it, the real bridge binary with --engine kubernetes, the real client and
// the scripted model. They run only when BOXWIRE_K8S_TESTS=1 (make kube).
package kube
