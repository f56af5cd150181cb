package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// finalizer keeps a pod's object after it is deleted from outside (an
// eviction, kubectl delete) until the bridge removes it, so that the
// bridge can tell it stopped (and how) and replace it, as it does a
// container that exited.
const finalizer = "boxwire.io/sandbox"

// cleanupTimeout bounds removing a half-made sandbox.
const cleanupTimeout = 30 * time.Second

// Create makes the sandbox's claim (when missing), the ConfigMap of its
// bridge folder's files and its pod; waits until the pod runs; starts its
// tunnel; and returns its state. On failure what it made is removed (a
// claim only when it made it) and the error says why the pod did not run
// (an image missing wraps sandbox.ErrImageNotFound; unschedulable, a
// volume that did not mount: the pod's last warning event). When ctx ends
// first, Create returns at once and the work goes on in the background
// (at most StartTimeout, or until Close) and removes what it made.
func (k *Kube) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	name := spec.Name
	if name == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		name = "boxwire-" + hex.EncodeToString(b[:])
	}
	sb, err := k.createDetached(ctx, spec, objectName(name))
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("create sandbox %s: %w", name, err)
	}
	return sb, nil
}

// createDetached runs create on a context of its own, tracked by k.wg.
func (k *Kube) createDetached(ctx context.Context, spec sandbox.Spec, name string) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Sandbox{}, err
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return sandbox.Sandbox{}, errors.New("manager closed")
	}
	k.wg.Add(1)
	k.mu.Unlock()
	type result struct {
		sb  sandbox.Sandbox
		err error
	}
	var (
		mu        sync.Mutex
		committed bool
		abandoned bool
		done      = make(chan result, 1)
	)
	commit := func() bool {
		mu.Lock()
		defer mu.Unlock()
		committed = !abandoned
		return committed
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.cfg.StartTimeout+cleanupTimeout)
	stop := context.AfterFunc(k.closing, cancel)
	go func() {
		defer k.wg.Done()
		defer cancel()
		defer stop()
		sb, err := k.create(ectx, spec, name, commit)
		done <- result{sb, err}
	}()
	select {
	case r := <-done:
		return r.sb, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	if committed {
		mu.Unlock()
		r := <-done
		return r.sb, r.err
	}
	abandoned = true
	mu.Unlock()
	return sandbox.Sandbox{}, ctx.Err()
}

// create is Create's work on ctx; commit hands the result to the caller
// or says it left (create then removes what it made).
func (k *Kube) create(ctx context.Context, spec sandbox.Spec, name string, commit func() bool) (sb sandbox.Sandbox, err error) {
	switch {
	case spec.Image == "":
		return sandbox.Sandbox{}, errors.New("spec has no image")
	case spec.AgentBinary != "":
		return sandbox.Sandbox{}, errors.New("--agent-binary cannot reach a pod (it is a file on the bridge's host): build an image with it instead")
	}
	fold, err := readFolder(spec.SocketDir, spec.Env)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	agentSock := agentSocket(spec.Env)
	pod, err := k.podFor(spec, name, fold.sockets, agentSock, fold.files)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	pod.Finalizers = []string{finalizer}
	log := k.log.With("pod", name)
	if spec.WorkspaceVolume != "" && k.cfg.Workspace == WorkspaceClaim {
		made, err := k.ensureClaim(ctx, spec.WorkspaceVolume, spec.Labels)
		if err != nil {
			return sandbox.Sandbox{}, err
		}
		if made {
			defer func() {
				if err != nil {
					k.cleanup(ctx, "claim", func(ctx context.Context) error { return k.RemoveVolume(ctx, spec.WorkspaceVolume) })
				}
			}()
		}
	}
	defer func() {
		if err != nil {
			k.cleanup(ctx, "pod", func(ctx context.Context) error { return k.Remove(ctx, name) })
		}
	}()
	if len(fold.files) > 0 {
		if err := k.putFiles(ctx, name, spec, fold.files); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	if _, err := k.cs.CoreV1().Pods(k.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("create pod %s: %w", name, k.mapErr(err, nil))
	}
	running, err := k.waitRunning(ctx, name)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	k.startTunnel(running)
	if !commit() {
		log.Debug("sandbox started after its caller gave up; removing it")
		return sandbox.Sandbox{}, context.Canceled
	}
	log.Debug("sandbox started", "image", spec.Image, "node", running.Spec.NodeName)
	return toSandbox(running), nil
}

// cleanup runs remove on a context detached from ctx, logging a failure
// (the caller already has an error).
func (k *Kube) cleanup(ctx context.Context, what string, remove func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := remove(ctx); err != nil {
		k.log.Warn("remove half-made sandbox", "what", what, "err", err)
	}
}

// putFiles makes the ConfigMap of the bridge folder's files, named like
// the pod and labelled like it.
func (k *Kube) putFiles(ctx context.Context, name string, spec sandbox.Spec, files map[string]string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: objectLabels(spec.Labels), Annotations: objectAnnotations(spec.Labels, spec.Name)},
		Data:       files,
	}
	_, err := k.cs.CoreV1().ConfigMaps(k.ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // left by a removal that failed
		_, err = k.cs.CoreV1().ConfigMaps(k.ns).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create configmap %s: %w", name, k.mapErr(err, nil))
	}
	return nil
}

// ensureClaim makes the workspace claim for volume unless it exists, and
// reports whether it made it.
func (k *Kube) ensureClaim(ctx context.Context, volume string, labels map[string]string) (bool, error) {
	name := objectName(volume)
	claims := k.cs.CoreV1().PersistentVolumeClaims(k.ns)
	if _, err := claims.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return false, nil
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get claim %s: %w", name, k.mapErr(err, nil))
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: objectLabels(labels), Annotations: objectAnnotations(labels, volume)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: k.wsSize}},
		},
	}
	if k.cfg.StorageClass != "" {
		pvc.Spec.StorageClassName = &k.cfg.StorageClass
	}
	if _, err := claims.Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("create claim %s: %w", name, k.mapErr(err, nil))
	}
	k.log.Debug("claim created", "claim", name)
	return true, nil
}
