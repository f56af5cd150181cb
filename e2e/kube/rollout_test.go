package kube_test

import (
	"context"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

const moveScript = `{"model":"scripted","turns":[
  {"when":"write","steps":[
    {"content":"Writing.","tool_calls":[{"name":"execute","arguments":{"command":"echo kept > /workspace/k; echo started; sleep 6; echo finished","timeout":60}}]},
    {"content":"Done."}
  ]},
  {"when":"read","steps":[
    {"content":"Reading.","tool_calls":[{"name":"execute","arguments":{"command":"cat /workspace/k"}}]},
    {"content":"Read it."}
  ]},
  {"steps":[{"content":"I only know scripted answers."}]}
]}`

// A rollout on Kubernetes is a new image tag imported into the node (or
// pushed to the registry) and the threads moved to it: a thread moved
// while its turn runs finishes the turn in its old pod, then moves at its
// idle point (sandbox_exited and sandbox_replaced image_update) to a pod
// of the new tag on the same claim.
func TestKubeImageMoveAtIdlePoint(t *testing.T) {
	next := "boxwire:kube-e2e-next"
	dockerTag(t, next)
	importImage(t, next)
	e := newEnv(t, moveScript)
	e.startBridge("--images", next, "--reap-interval", "300ms")
	s := e.dial("")
	thread := s.conn.Thread()
	old := threadPod(t, thread)
	ctx, cancel := context.WithTimeout(context.Background(), turnTimeout)
	defer cancel()
	moved := false
	var seen []wire.Type
	done, err := s.conn.Run(ctx, "write and wait", func(ev wire.Envelope) {
		seen = append(seen, ev.Type)
		if ev.Type == wire.TypeToolOutput && !moved {
			moved = true
			info, err := chat.SetImage(ctx, chat.Config{URL: e.bridge, Token: e.token}, thread, next)
			if err != nil || info.Image != next {
				t.Errorf("move the thread to %s: %+v %v", next, info, err)
			}
		}
	})
	if err != nil || !moved {
		t.Fatalf("the turn: %v (moved %v, events %v)", err, moved, seen)
	}
	if done.Reason != wire.ReasonStop {
		t.Fatalf("a turn whose thread moved meanwhile ended with %q (events %v): it should finish on the old pod", done.Reason, seen)
	}
	for _, typ := range seen {
		if typ == wire.TypeSandboxExited {
			t.Fatalf("the pod was replaced during the turn (events %v)", seen)
		}
	}
	ex := s.replacedBy(wire.ExitImageUpdate)
	if !strings.Contains(ex.Message, next) {
		t.Errorf("sandbox_exited %q does not name the new image", ex.Message)
	}
	now := threadPod(t, thread)
	if now.UID == old.UID || now.Spec.Containers[0].Image != next {
		t.Fatalf("after the move: pod %s runs %s (old pod %s)", now.Name, now.Spec.Containers[0].Image, old.Name)
	}
	s.turnShows("read it back", "kept")
}
