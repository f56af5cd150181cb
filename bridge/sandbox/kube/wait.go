package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// watchSeconds bounds one watch of a pod; waitPod watches again after it.
const watchSeconds = 10

// waitPod calls check with the pod name's state (nil once it is gone)
// until check says done or fails, or ctx ends. It reads the pod, then
// watches it from there, reading it again whenever a watch ends.
func (k *Kube) waitPod(ctx context.Context, name string, check func(*corev1.Pod) (bool, error)) error {
	pods := k.cs.CoreV1().Pods(k.ns)
	for {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		rv := ""
		switch {
		case apierrors.IsNotFound(err):
			p = nil
		case err != nil:
			return k.mapErr(err, nil)
		default:
			rv = p.ResourceVersion
		}
		if done, err := check(p); done || err != nil {
			return err
		}
		secs := int64(watchSeconds)
		w, err := pods.Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv, TimeoutSeconds: &secs,
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		done, err := watchPod(ctx, w, check)
		w.Stop()
		if done || err != nil {
			return err
		}
	}
}

// watchPod feeds w's events to check until it is done, fails, the watch
// ends (false, nil) or ctx ends.
func watchPod(ctx context.Context, w watch.Interface, check func(*corev1.Pod) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error:
				return false, nil
			case !isPod:
				continue
			case ev.Type == watch.Deleted:
				p = nil
			}
			if done, err := check(p); done || err != nil {
				return done, err
			}
		}
	}
}

// waitRunning waits (at most StartTimeout) until the pod name runs its
// agent container, and returns it. A pod that cannot run fails at once
// with what the kubelet says (an image missing wraps
// sandbox.ErrImageNotFound); one that is still waiting at the deadline
// fails with its scheduling condition and last warning event.
func (k *Kube) waitRunning(ctx context.Context, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.StartTimeout)
	defer cancel()
	var last *corev1.Pod
	err := k.waitPod(ctx, name, func(p *corev1.Pod) (bool, error) {
		if p == nil {
			return false, fmt.Errorf("pod %s was deleted while starting", name)
		}
		last = p
		return podStarted(p)
	})
	if err == nil {
		return last, nil
	}
	if ctx.Err() != nil && !errors.Is(err, sandbox.ErrImageNotFound) {
		return nil, fmt.Errorf("pod %s not running after %s: %s", name, k.cfg.StartTimeout, k.whyWaiting(context.WithoutCancel(ctx), last))
	}
	return nil, err
}

// podStarted says whether p's agent container runs, or why it never will.
func podStarted(p *corev1.Pod) (bool, error) {
	if p.DeletionTimestamp != nil {
		return false, fmt.Errorf("pod %s is being deleted", p.Name)
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, fmt.Errorf("pod %s stopped before it ran: %s", p.Name, stoppedHow(p))
	}
	cs := agentStatus(p)
	if cs == nil {
		return false, nil
	}
	if cs.State.Running != nil {
		return p.Status.Phase == corev1.PodRunning, nil
	}
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
			return false, fmt.Errorf("%w: %s: %s: %s", sandbox.ErrImageNotFound, p.Spec.Containers[0].Image, w.Reason, w.Message)
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return false, fmt.Errorf("pod %s cannot start: %s: %s", p.Name, w.Reason, w.Message)
		}
	}
	if t := cs.State.Terminated; t != nil {
		return false, fmt.Errorf("pod %s stopped before it ran: %s", p.Name, stoppedHow(p))
	}
	return false, nil
}

// agentStatus is the status of p's agent container (nil before it has one).
func agentStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == agentContainer {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// stoppedHow says how p's agent container ended.
func stoppedHow(p *corev1.Pod) string {
	cs := agentStatus(p)
	if cs == nil || cs.State.Terminated == nil {
		return fmt.Sprintf("phase %s %s", p.Status.Phase, p.Status.Message)
	}
	t := cs.State.Terminated
	return strings.TrimSpace(fmt.Sprintf("exit code %d, %s %s", t.ExitCode, t.Reason, t.Message))
}

// whyWaiting explains a pod that did not start: its scheduling condition,
// its container's waiting reason and its last warning event.
func (k *Kube) whyWaiting(ctx context.Context, p *corev1.Pod) string {
	if p == nil {
		return "the pod was never seen"
	}
	var why []string
	unscheduled := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			why = append(why, fmt.Sprintf("not scheduled: %s %s", c.Reason, c.Message))
			unscheduled = true
		}
	}
	if cs := agentStatus(p); cs != nil && cs.State.Waiting != nil {
		why = append(why, fmt.Sprintf("container waiting: %s %s", cs.State.Waiting.Reason, cs.State.Waiting.Message))
	}
	// The scheduler's repeated failures are one event series that keeps
	// its first message (events.k8s.io), so for a pod not scheduled its
	// condition, which the scheduler rewrites, says it and the event could
	// only contradict it.
	if ev, ok := k.lastWarning(ctx, p.Name); ok && !(unscheduled && ev.Reason == "FailedScheduling") {
		why = append(why, "last event: "+ev.Reason+": "+ev.Message)
	}
	if len(why) == 0 {
		return "phase " + string(p.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// lastWarning is the newest warning event about the pod name (false if
// none or the events cannot be read).
func (k *Kube) lastWarning(ctx context.Context, name string) (corev1.Event, bool) {
	ctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	evs, err := k.cs.CoreV1().Events(k.ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", name),
			fields.OneTermEqualSelector("type", corev1.EventTypeWarning)).String(),
	})
	if err != nil || len(evs.Items) == 0 {
		return corev1.Event{}, false
	}
	return newestEvent(evs.Items), true
}

// newestEvent is the event of evs seen last. Events made through the
// events.k8s.io API (the scheduler's) have no LastTimestamp in core/v1:
// their time is EventTime, or their series' LastObservedTime when they
// repeat.
func newestEvent(evs []corev1.Event) corev1.Event {
	seen := func(e corev1.Event) time.Time {
		t := e.LastTimestamp.Time
		for _, u := range []time.Time{e.FirstTimestamp.Time, e.EventTime.Time} {
			if u.After(t) {
				t = u
			}
		}
		if e.Series != nil && e.Series.LastObservedTime.After(t) {
			t = e.Series.LastObservedTime.Time
		}
		return t
	}
	return slices.MaxFunc(evs, func(a, b corev1.Event) int { return seen(a).Compare(seen(b)) })
}
