package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// PodFor exposes podFor to the black-box tests: the pod Create would make.
func (k *Kube) PodFor(spec sandbox.Spec) (*corev1.Pod, error) {
	f, err := readFolder(spec.SocketDir, spec.Env)
	if err != nil {
		return nil, err
	}
	return k.podFor(spec, ObjectName(spec.Name), f.sockets, agentSocket(spec.Env), f.files)
}

// ObjectName exposes objectName.
var ObjectName = objectName

// NewestEvent exposes newestEvent.
var NewestEvent = newestEvent
