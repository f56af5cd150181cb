package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The suite runs only with BOXWIRE_K8S_TESTS=1. BOXWIRE_KUBECONFIG names a
// cluster that is already up (e2e/kube/cluster/up.sh, make k8s-up): the suite then
// leaves it running; else it starts one and stops it at the end.
var (
	enabled   = os.Getenv("BOXWIRE_K8S_TESTS") == "1"
	image     = envOr("BOXWIRE_IMAGE", "boxwire:latest")
	bridgeBin string
	kubecfg   string
	restCfg   *rest.Config
	cs        kubernetes.Interface
	namespace string // the suite's own namespace
)

// Deadlines for waits in the suite.
const (
	startTimeout = 60 * time.Second
	turnTimeout  = 90 * time.Second
	eventTimeout = 60 * time.Second
	goneTimeout  = 90 * time.Second
)

func TestMain(m *testing.M) {
	if !enabled {
		fmt.Println("e2e/kube: skipped (set BOXWIRE_K8S_TESTS=1, or run make kube)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	root := repoRoot()
	kubecfg = os.Getenv("BOXWIRE_KUBECONFIG")
	if kubecfg == "" {
		began := time.Now()
		up := exec.Command("bash", filepath.Join(root, "e2e/kube/cluster/up.sh"))
		up.Env = append(os.Environ(), "K8S_IMAGES="+image)
		up.Stderr = os.Stderr
		out, err := up.Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e/kube: e2e/kube/cluster/up.sh:", err)
			down(root)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e/kube: cluster up in %.1fs\n", time.Since(began).Seconds())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		kubecfg = lines[len(lines)-1]
		defer down(root)
	}
	var err error
	if restCfg, err = clientcmd.BuildConfigFromFlags("", kubecfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube:", err)
		return 1
	}
	if cs, err = kubernetes.NewForConfig(restCfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "boxwire-kube-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// BOXWIRE_E2E_BRIDGE, a bridge built elsewhere (another commit's, to
	// see a test fail without a fix), is used instead of this tree's.
	if bridgeBin = os.Getenv("BOXWIRE_E2E_BRIDGE"); bridgeBin == "" {
		bridgeBin = filepath.Join(dir, "bridge")
		build := exec.Command("go", "build", "-race", "-o", bridgeBin, "github.com/boxwire/boxwire/bridge")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/kube: build bridge:", err)
			return 1
		}
	}
	if namespace, err = makeNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube:", err)
		return 1
	}
	code = m.Run()
	if left := leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e/kube: FAIL: the run left %d things in namespace %s:\n  %s\n", len(left), namespace, strings.Join(left, "\n  "))
		code = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
	defer cancel()
	if err := cs.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube: delete namespace:", err)
	}
	return code
}

// down stops the cluster the suite started, unless BOXWIRE_K8S_KEEP=1.
func down(root string) {
	if os.Getenv("BOXWIRE_K8S_KEEP") == "1" {
		return
	}
	cmd := exec.Command("bash", filepath.Join(root, "e2e/kube/cluster/down.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kube: e2e/kube/cluster/down.sh:", err)
	}
}

// makeNamespace makes the suite's namespace and waits for its default
// ServiceAccount (pods are refused before it exists).
func makeNamespace() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	name := "boxwire-e2e-" + randHex(3)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create namespace: %w", err)
	}
	for {
		if _, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return name, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("namespace %s has no default ServiceAccount: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leftovers lists what is left in the suite's namespace: pods, claims,
// ConfigMaps (but the root CA one every namespace gets), and volumes
// bound to its claims.
func leftovers() []string {
	ctx, cancel := context.WithTimeout(context.Background(), goneTimeout)
	defer cancel()
	var left []string
	for {
		left = left[:0]
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return []string{"list pods: " + err.Error()}
		}
		for _, p := range pods.Items {
			left = append(left, "pod "+p.Name)
		}
		claims, err := cs.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return []string{"list claims: " + err.Error()}
		}
		for _, c := range claims.Items {
			left = append(left, "claim "+c.Name)
		}
		cms, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return []string{"list configmaps: " + err.Error()}
		}
		for _, c := range cms.Items {
			if c.Name != "kube-root-ca.crt" {
				left = append(left, "configmap "+c.Name)
			}
		}
		pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return []string{"list volumes: " + err.Error()}
		}
		for _, v := range pvs.Items {
			if v.Spec.ClaimRef != nil && v.Spec.ClaimRef.Namespace == namespace {
				left = append(left, "volume "+v.Name)
			}
		}
		if len(left) == 0 || ctx.Err() != nil {
			return left
		}
		time.Sleep(250 * time.Millisecond) // a deletion may still be under way
	}
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
