package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations the manager keeps on its pods and claims (besides the
// bridge's labels, each also an annotation under its own key).
const (
	// annName is the name the bridge gave (Spec.Name, the volume name):
	// the object's own name is that name made a valid Kubernetes name.
	annName = "boxwire.io/name"
	// annRuntime is Spec.Runtime.
	annRuntime = "boxwire.io/runtime"
	// annAgentDir and annSocketDir are the sandbox's folders on the
	// bridge's host, and annAgentSocket and annSockets the names the
	// tunnel carries: a restarted bridge starts the tunnel again from
	// them (tunnel.go).
	annAgentDir    = "boxwire.io/agent-dir"
	annSocketDir   = "boxwire.io/socket-dir"
	annAgentSocket = "boxwire.io/agent-socket"
	annSockets     = "boxwire.io/sockets"
	// labelManaged marks every object the manager makes.
	labelManaged = "app.kubernetes.io/managed-by"
	managedBy    = "boxwire"
)

// listOne asks for one item: enough to check access.
var listOne = metav1.ListOptions{Limit: 1}

// objectName turns a bridge name into a valid Kubernetes object name (a
// DNS-1123 label, so that a pod and a claim take the same name): lower
// case, anything else than letters, digits and '-' becomes '-'; a name
// that had to change gets a hash of the original, so two bridge names
// never meet in one object name.
func objectName(name string) string {
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	s := strings.Trim(b.String(), "-")
	if max := validation.DNS1123LabelMaxLength - len(suffix); len(s) > max {
		s = strings.TrimRight(s[:max], "-")
	}
	if s == "" {
		s = "boxwire"
	}
	return s + suffix
}

// objectLabels are the labels of an object for the bridge's labels l:
// every pair Kubernetes takes as a label (for selection), and the
// manager's own.
func objectLabels(l map[string]string) map[string]string {
	out := map[string]string{labelManaged: managedBy}
	for k, v := range l {
		if validLabel(k, v) {
			out[k] = v
		}
	}
	return out
}

// objectAnnotations are the annotations of an object for the bridge's
// labels l (all of them, exactly) and its name.
func objectAnnotations(l map[string]string, name string) map[string]string {
	out := maps.Clone(l)
	if out == nil {
		out = map[string]string{}
	}
	out[annName] = name
	return out
}

// validLabel reports whether k=v is a valid Kubernetes label.
func validLabel(k, v string) bool {
	return len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0
}

// bridgeLabels reads the bridge's labels back from an object's
// annotations: every annotation but the manager's own.
func bridgeLabels(meta metav1.ObjectMeta) map[string]string {
	out := map[string]string{}
	for k, v := range meta.Annotations {
		if !strings.HasPrefix(k, "boxwire.io/") {
			out[k] = v
		}
	}
	return out
}

// selector is the label selector for a List of the bridge's labels want:
// the pairs that can be labels (the rest is checked by matches).
func selector(want map[string]string) string {
	sel := map[string]string{labelManaged: managedBy}
	for k, v := range want {
		if validLabel(k, v) {
			sel[k] = v
		}
	}
	return labels.SelectorFromSet(sel).String()
}

// matches reports whether the bridge labels of meta include all of want.
func matches(meta metav1.ObjectMeta, want map[string]string) bool {
	have := bridgeLabels(meta)
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
