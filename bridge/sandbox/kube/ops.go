package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// Inspect returns the pod id's state; an error wraps sandbox.ErrNotFound
// when it is gone. A running pod whose tunnel is not up (a bridge that
// restarted) gets it started again.
func (k *Kube) Inspect(ctx context.Context, id string) (sandbox.Sandbox, error) {
	p, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("inspect sandbox %s: %w", id, k.mapErr(err, sandbox.ErrNotFound))
	}
	sb := toSandbox(p)
	if sb.Running {
		k.startTunnel(p)
	}
	return sb, nil
}

// toSandbox is the sandbox.Sandbox of pod p. It runs while its agent
// container runs and nobody deleted it; once stopped, ExitCode and
// OOMKilled say how (a pod deleted before its container ended has exit
// code 137, killed).
func toSandbox(p *corev1.Pod) sandbox.Sandbox {
	sb := sandbox.Sandbox{
		ID: p.Name, Name: p.Annotations[annName], Labels: bridgeLabels(p.ObjectMeta),
		Created: p.CreationTimestamp.UTC(), Runtime: p.Annotations[annRuntime],
	}
	if len(p.Spec.Containers) > 0 {
		sb.Image = p.Spec.Containers[0].Image
	}
	cs := agentStatus(p)
	switch {
	case cs != nil && cs.State.Terminated != nil:
		sb.ExitCode = int(cs.State.Terminated.ExitCode)
		sb.OOMKilled = cs.State.Terminated.Reason == "OOMKilled"
	case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		sb.ExitCode = 137
	case cs != nil && cs.State.Running != nil && p.Status.Phase == corev1.PodRunning:
		sb.Running = true
	}
	return sb
}

// Stop deletes the pod id with grace as its termination grace period and
// waits until its container has stopped. The pod's object stays (its
// finalizer) with its exit state until Remove. A pod already gone is
// ErrNotFound.
func (k *Kube) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int64(grace.Seconds())
	err := k.cs.CoreV1().Pods(k.ns).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, k.mapErr(err, sandbox.ErrNotFound))
	}
	defer k.endTunnel(id)()
	err = k.waitPod(ctx, id, func(p *corev1.Pod) (bool, error) {
		return p == nil || !toSandbox(p).Running && agentStopped(p), nil
	})
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// agentStopped says p's agent container has terminated or never started.
func agentStopped(p *corev1.Pod) bool {
	cs := agentStatus(p)
	return cs == nil || cs.State.Running == nil
}

// Remove ends the pod id's tunnel, deletes the pod and its ConfigMap and
// waits until the pod is gone (so that a new pod may take its name). Its
// workspace claim stays. A pod already gone is not an error.
func (k *Kube) Remove(ctx context.Context, id string) error {
	defer k.endTunnel(id)()
	pods := k.cs.CoreV1().Pods(k.ns)
	secs := int64(k.cfg.DeleteGrace.Seconds())
	err := pods.Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove sandbox %s: %w", id, k.mapErr(err, nil))
	}
	if err := k.dropFinalizer(ctx, id); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	if err := k.cs.CoreV1().ConfigMaps(k.ns).Delete(ctx, id, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove sandbox %s: configmap: %w", id, k.mapErr(err, nil))
	}
	err = k.waitPod(ctx, id, func(p *corev1.Pod) (bool, error) {
		if p != nil && hasFinalizer(p) { // a finalizer put back by a racing update
			return false, k.dropFinalizer(ctx, id)
		}
		return p == nil, nil
	})
	if err != nil {
		return fmt.Errorf("remove sandbox %s: wait until gone: %w", id, err)
	}
	return nil
}

// dropFinalizer takes the manager's finalizer off the pod id (gone: done).
func (k *Kube) dropFinalizer(ctx context.Context, id string) error {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, err := k.cs.CoreV1().Pods(k.ns).Patch(ctx, id, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("drop finalizer: %w", k.mapErr(err, nil))
	}
	return nil
}

// hasFinalizer says whether p still carries the manager's finalizer.
func hasFinalizer(p *corev1.Pod) bool {
	for _, f := range p.Finalizers {
		if f == finalizer {
			return true
		}
	}
	return false
}

// Logs returns the last tail lines of the pod id's agent container, also
// after it stopped (until Remove).
func (k *Kube) Logs(ctx context.Context, id string, tail int) (string, error) {
	n := int64(tail)
	req := k.cs.CoreV1().Pods(k.ns).GetLogs(id, &corev1.PodLogOptions{Container: agentContainer, TailLines: &n})
	out, err := req.DoRaw(ctx)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("logs of sandbox %s: %w: %w", id, sandbox.ErrNotFound, err)
		}
		return "", fmt.Errorf("logs of sandbox %s: %w", id, k.mapErr(err, nil))
	}
	return string(out), nil
}

// RemoveVolume deletes the workspace claim of the bridge's volume name;
// a missing one is not an error (nor, with emptyDir workspaces, any).
func (k *Kube) RemoveVolume(ctx context.Context, name string) error {
	if k.cfg.Workspace != WorkspaceClaim {
		return nil
	}
	err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Delete(ctx, objectName(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, k.mapErr(err, nil))
	}
	return nil
}

// List returns the pods whose bridge labels include all of labels.
func (k *Kube) List(ctx context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	res, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(labels)})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", k.mapErr(err, nil))
	}
	var out []sandbox.Sandbox
	for i := range res.Items {
		if matches(res.Items[i].ObjectMeta, labels) {
			out = append(out, toSandbox(&res.Items[i]))
		}
	}
	return out, nil
}

// ListVolumes returns the bridge's names of the workspace claims whose
// bridge labels include all of labels (none with emptyDir workspaces).
func (k *Kube) ListVolumes(ctx context.Context, labels map[string]string) ([]string, error) {
	if k.cfg.Workspace != WorkspaceClaim {
		return nil, nil
	}
	res, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", k.mapErr(err, nil))
	}
	var out []string
	for _, c := range res.Items {
		if matches(c.ObjectMeta, labels) && c.DeletionTimestamp == nil {
			out = append(out, strings.TrimSpace(c.Annotations[annName]))
		}
	}
	return out, nil
}
