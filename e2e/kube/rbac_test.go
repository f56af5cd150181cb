package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// applyRBAC makes the objects of bridge/sandbox/kube/deploy/rbac.yaml in the
// suite's namespace and removes them when the test ends.
func applyRBAC(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "bridge/sandbox/kube/deploy/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = namespace
			_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = cs.CoreV1().ServiceAccounts(namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			o.Namespace = namespace
			_, err = cs.RbacV1().Roles(namespace).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = cs.RbacV1().Roles(namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.RoleBinding:
			o.Namespace = namespace
			for i := range o.Subjects {
				o.Subjects[i].Namespace = namespace
			}
			_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = cs.RbacV1().RoleBindings(namespace).Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("rbac.yaml has a %T", obj)
		}
		if err != nil {
			t.Fatalf("apply rbac.yaml: %v", err)
		}
	}
}

// bridgeKubeconfig writes a kubeconfig for the bridge's ServiceAccount.
func bridgeKubeconfig(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	secs := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "boxwire-bridge",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the bridge: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: bridge, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: bridge, namespace: %q}}]
current-context: c
`, restCfg.Host, restCfg.TLSClientConfig.CAFile, tok.Status.Token, namespace)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A bridge whose identity has only bridge/sandbox/kube/deploy/rbac.yaml's Role runs
// a thread end to end (pod, claim, relay, logs, delete, gc), and that
// identity can do nothing outside its namespace.
func TestKubeBridgeWithItsRole(t *testing.T) {
	applyRBAC(t)
	kc := bridgeKubeconfig(t)
	e := newEnv(t, writeScript)
	e.kubeconfig = kc
	e.startBridge()
	s := e.dial("")
	thread := s.conn.Thread()
	events, done := s.turn("write a file")
	if done.Reason != wire.ReasonStop {
		t.Fatalf("turn ended with %q", done.Reason)
	}
	if out, _ := toolOutput(t, events); !strings.Contains(out, "hello from the pod") {
		t.Errorf("execute streamed %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if err := chat.DeleteThread(ctx, chat.Config{URL: e.bridge, Token: e.token}, thread); err != nil {
		t.Fatalf("delete thread: %v", err)
	}
	waitFor(t, "the thread's objects gone", func() bool {
		p, c, m := objectsOf(t, e.id)
		return p+c+m == 0
	})

	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	bcs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func() error{
		"list pods in default": func() error { _, err := bcs.CoreV1().Pods("default").List(ctx, listOne()); return err },
		"list secrets":         func() error { _, err := bcs.CoreV1().Secrets(namespace).List(ctx, listOne()); return err },
		"list nodes":           func() error { _, err := bcs.CoreV1().Nodes().List(ctx, listOne()); return err },
	} {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("the bridge's identity may %s: %v", what, err)
		}
	}
}

func listOne() metav1.ListOptions { return metav1.ListOptions{Limit: 1} }
