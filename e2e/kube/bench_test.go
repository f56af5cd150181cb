package kube_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/client/chat"
)

// benchRounds is how many new threads each figure times.
const benchRounds = 7

// Pod-backed new-thread figures (make bench-k8s; BOXWIRE_BENCH=1): a new
// thread until its agent said hello, cold (a pod made for it) and from the
// warm pool (a pod made before), each beside a bare pod of the same image
// created and watched until it runs. Medians of benchRounds, interleaved.
func TestKubeBenchNewThread(t *testing.T) {
	if os.Getenv("BOXWIRE_BENCH") != "1" {
		t.Skip("BOXWIRE_BENCH=1 (make bench-k8s)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bare := func() time.Duration { return barePod(t, ctx) }

	cold := newEnv(t, writeScript)
	cold.startBridge("--max-sandboxes", "0")
	colds, bares := interleave(benchRounds, func() time.Duration { return newThreadReady(t, ctx, cold) }, bare)
	cold.stopBridge()
	report(t, "new_thread_pod_cold", colds, bares)

	warm := newEnv(t, writeScript)
	warm.startBridge("--pool", "1", "--max-sandboxes", "0")
	ready := 0
	warms, bares := interleave(benchRounds, func() time.Duration {
		ready++ // the pool's next sandbox (untimed)
		waitFor(t, "the pool refilled", func() bool {
			return strings.Count(warm.logText(), "warm pool: sandbox ready") >= ready
		})
		return newThreadReady(t, ctx, warm)
	}, bare)
	report(t, "new_thread_pod_warm", warms, bares)
}

// interleave runs a and b rounds times each, alternating.
func interleave(rounds int, a, b func() time.Duration) (as, bs []time.Duration) {
	for range rounds {
		as = append(as, a())
		bs = append(bs, b())
	}
	return as, bs
}

// report logs a figure: its median, the bare pod's, and the samples.
func report(t *testing.T, name string, ds, bares []time.Duration) {
	t.Logf("BENCH %s: median %.0f ms (bare pod running %.0f ms; added %.0f ms); samples %v",
		name, medianMS(ds), medianMS(bares), medianMS(ds)-medianMS(bares), msOf(ds))
}

// newThreadReady times a new thread until its agent said hello, then
// deletes the thread (untimed).
func newThreadReady(t *testing.T, ctx context.Context, e *env) time.Duration {
	t.Helper()
	cfg := chat.Config{URL: e.bridge, Token: e.token}
	start := time.Now()
	conn, err := chat.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("new thread: %v", err)
	}
	d := time.Since(start)
	conn.Close()
	if err := chat.DeleteThread(ctx, cfg, conn.Thread()); err != nil {
		t.Fatalf("delete thread: %v", err)
	}
	return d
}

// barePod times creating a pod of the image (the agent's hardening, no
// claim, no relay) until it runs, then deletes it (untimed).
func barePod(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	name := "bwbench-" + randHex(4)
	uid := int64(1000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptrTo(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: ptrTo(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "agent", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "600"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false), ReadOnlyRootFilesystem: ptrTo(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
	start := time.Now()
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bare pod: %v", err)
	}
	for {
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("bare pod: %v", err)
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := time.Since(start)
	zero := int64(0)
	if err := cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete bare pod: %v", err)
	}
	return d
}

func medianMS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

func msOf(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%.0f", float64(d.Microseconds())/1000)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
