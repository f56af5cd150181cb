package kube

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/boxwire/boxwire/bridge/sandbox"
)

// agentContainer is the name of the pod's one container.
const agentContainer = "agent"

// Sizes of the pod's memory-backed socket folders: room for sockets.
var socketDirSize = resource.MustParse("1Mi")

// Volume names in the pod.
const (
	volTmp       = "tmp"
	volBridge    = "bridge"
	volAgent     = "agent"
	volWorkspace = "workspace"
	volFiles     = "files"
)

// podFor builds the hardened pod for spec, with the tunnel's sockets
// (sockets: names in the bridge folder; agentSock: the agent's socket
// name) and the bridge folder's files.
func (k *Kube) podFor(spec sandbox.Spec, name string, sockets []string, agentSock string, files map[string]string) (*corev1.Pod, error) {
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, err
	}
	lim := sandbox.Limits{MemoryBytes: spec.MemoryBytes, NanoCPUs: spec.NanoCPUs}
	lim = lim.WithDefaults(k.cfg.Defaults)
	limits := corev1.ResourceList{
		corev1.ResourceMemory: *resource.NewQuantity(lim.MemoryBytes, resource.BinarySI),
		corev1.ResourceCPU:    *resource.NewMilliQuantity(lim.NanoCPUs/1e6, resource.DecimalSI),
	}
	requests := corev1.ResourceList{corev1.ResourceMemory: k.req, corev1.ResourceCPU: k.cpuReq}
	for r, q := range requests { // a request above the limit is refused
		if l := limits[r]; q.Cmp(l) > 0 {
			requests[r] = l
		}
	}
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if k.cfg.SeccompProfile != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &k.cfg.SeccompProfile}
	}
	var env []corev1.EnvVar
	for _, kv := range spec.Env {
		key, val, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: key, Value: val})
	}
	tmpSize := resource.NewQuantity(lim.TmpfsBytes, resource.BinarySI)
	vols := []corev1.Volume{
		memDir(volTmp, tmpSize),
		memDir(volBridge, &socketDirSize),
		memDir(volAgent, &socketDirSize),
	}
	mounts := []corev1.VolumeMount{
		{Name: volTmp, MountPath: "/tmp"},
		{Name: volBridge, MountPath: sandbox.SocketMount},
		{Name: volAgent, MountPath: sandbox.AgentMount},
	}
	if len(files) > 0 {
		vols = append(vols, corev1.Volume{Name: volFiles, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, DefaultMode: ptr(int32(0o444)),
		}}})
		for _, f := range sortedKeys(files) {
			mounts = append(mounts, corev1.VolumeMount{Name: volFiles, MountPath: path.Join(sandbox.SocketMount, f), SubPath: f, ReadOnly: true})
		}
	}
	if spec.WorkspaceVolume != "" {
		src := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		if k.cfg.Workspace == WorkspaceClaim {
			src = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: objectName(spec.WorkspaceVolume)}}
		}
		vols = append(vols, corev1.Volume{Name: volWorkspace, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: volWorkspace, MountPath: sandbox.WorkspaceMount})
	}
	runtimeClass := k.cfg.RuntimeClass
	if spec.Runtime != "" {
		runtimeClass = spec.Runtime
	}
	ann := objectAnnotations(spec.Labels, spec.Name)
	ann[annRuntime] = spec.Runtime
	ann[annAgentDir], ann[annSocketDir] = spec.AgentDir, spec.SocketDir
	ann[annAgentSocket], ann[annSockets] = agentSock, strings.Join(sockets, ",")
	grace := int64(k.cfg.DeleteGrace.Seconds())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: objectLabels(spec.Labels), Annotations: ann},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: ptr(true), FSGroup: &gid,
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            agentContainer,
				Image:           spec.Image,
				ImagePullPolicy: k.cfg.PullPolicy,
				Args:            spec.Cmd,
				Env:             env,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: requests},
				VolumeMounts:    mounts,
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: ptr(true),
					Privileged:               ptr(false),
					AllowPrivilegeEscalation: ptr(false),
					ReadOnlyRootFilesystem:   ptr(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
			}},
			Volumes: vols,
		},
	}
	if runtimeClass != "" {
		pod.Spec.RuntimeClassName = &runtimeClass
	}
	return pod, nil
}

// memDir is a memory-backed emptyDir of the given size.
func memDir(name string, size *resource.Quantity) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: size,
	}}}
}

// parseUser reads Spec.User, "UID:GID" (numeric: runAsNonRoot cannot check
// a user name); empty means 1000:1000, the image's user.
func parseUser(u string) (uid, gid int64, err error) {
	if u == "" {
		return 1000, 1000, nil
	}
	us, gs, ok := strings.Cut(u, ":")
	if !ok {
		gs = us
	}
	uid, err1 := strconv.ParseInt(us, 10, 64)
	gid, err2 := strconv.ParseInt(gs, 10, 64)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("sandbox user %q: pods need a numeric uid:gid", u)
	case uid == 0 || gid == 0:
		return 0, 0, errors.New("sandbox user: pods never run as root (uid or gid 0)")
	}
	return uid, gid, nil
}

func ptr[T any](v T) *T { return &v }
