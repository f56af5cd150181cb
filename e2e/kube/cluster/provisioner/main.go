// Command provisioner is the test cluster's volume provisioner (e2e/kube/cluster/up.sh):
// for each claim of its StorageClass that has no volume it makes a
// hostPath PersistentVolume in a folder of its own, owned by the sandbox
// user, bound to that claim; when a claim is deleted and its volume is
// released, it deletes the volume and its folder. It is what a storage
// vendor's provisioner does in a real cluster, on one node's disk.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// annProvisioner marks the volumes this provisioner made.
const annProvisioner = "pv.kubernetes.io/provisioned-by"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
}

type provisioner struct {
	cs       kubernetes.Interface
	class    string
	name     string
	dir      string
	uid, gid int
	log      *slog.Logger
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("provisioner", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file")
	p := &provisioner{log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	fs.StringVar(&p.class, "class", "boxwire-test", "the StorageClass it serves")
	fs.StringVar(&p.name, "name", "boxwire.test/hostpath", "the provisioner name the StorageClass names")
	fs.StringVar(&p.dir, "dir", "", "the folder volumes are made in")
	fs.IntVar(&p.uid, "uid", 1000, "owner of new volumes")
	fs.IntVar(&p.gid, "gid", 1000, "group of new volumes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if p.dir == "" {
		return errors.New("--dir is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	if p.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := p.once(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("round", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// once provisions every pending claim of the class and deletes every
// released volume of its own.
func (p *provisioner) once(ctx context.Context) error {
	claims, err := p.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.VolumeName == "" && c.DeletionTimestamp == nil && c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == p.class {
			if err := p.provision(ctx, c); err != nil {
				p.log.Warn("provision", "claim", c.Namespace+"/"+c.Name, "err", err)
			}
		}
	}
	vols, err := p.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, v := range vols.Items {
		if v.Annotations[annProvisioner] == p.name && (v.Status.Phase == corev1.VolumeReleased || v.Status.Phase == corev1.VolumeFailed) {
			if err := os.RemoveAll(v.Spec.HostPath.Path); err != nil {
				p.log.Warn("remove volume folder", "volume", v.Name, "err", err)
				continue
			}
			if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				p.log.Warn("delete volume", "volume", v.Name, "err", err)
			}
			p.log.Info("deleted", "volume", v.Name)
		}
	}
	return nil
}

// provision makes the folder and the volume of claim c, bound to it.
func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := "pv-" + string(c.UID)
	path := filepath.Join(p.dir, name)
	if err := os.MkdirAll(path, 0o700); err != nil {
		return err
	}
	if err := os.Chown(path, p.uid, p.gid); err != nil {
		return err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisioner: p.name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              p.class,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
		},
	}
	_, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name)
	}
	return err
}
