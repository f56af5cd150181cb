package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/boxwire/boxwire/bridge/internal/keyed"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// A capped workspace is a Docker volume of the local driver that mounts an
// ext4 filesystem (type=ext4, device=<Dir>/<volume>.dev). The filesystem
// lives in a sparse image file <Dir>/<volume>.img attached to a loop device;
// <volume>.dev is a symbolic link to that loop device. The link, not the
// device, is what the volume names, because a volume's options cannot
// change while the loop device's number can (after a host reboot, or when
// the loop was detached): attach re-points the link before every container
// start. Writing past the image's size fails with ENOSPC inside the sandbox
// and costs the host nothing more.
//
// The host tools are executed rather than reimplemented: mkfs.ext4 has no
// Go equivalent, and losetup --find --nooverlap allocates a free loop device
// (retrying when another process takes the same one) or returns the device
// already attached to the file, so attaching is idempotent.

// MinWorkspaceBytes is the smallest workspace cap: an ext4 filesystem
// needs room for its journal and metadata.
const MinWorkspaceBytes int64 = 16 << 20

// WorkspaceConfig says how to cap workspace volumes. The zero value means
// uncapped volumes (the local driver's plain folders).
type WorkspaceConfig struct {
	// Dir holds the image files and device links of capped workspaces. It
	// must be seen at the same path by the engine (as the socket folders
	// are). Empty means no capped workspaces are made or cleaned up.
	Dir string
	// Bytes is the size of a new workspace's filesystem; 0 means uncapped.
	// It is at least MinWorkspaceBytes when set. The image file is sparse:
	// the host pays only for what the sandbox writes.
	Bytes int64
}

// Capped reports whether new workspaces are capped.
func (c WorkspaceConfig) Capped() bool { return c.Dir != "" && c.Bytes > 0 }

// mountOptions are the ext4 mount options of a capped workspace: nodev and
// nosuid as on any sandbox-writable place; discard gives deleted blocks
// back to the host (the loop device punches holes in the image);
// noinit_itable keeps the kernel from zeroing inode tables that are holes
// in the image anyway (it would make the sparse file dense).
const mountOptions = "nodev,nosuid,discard,noinit_itable"

// volumeNameRE is what a workspace volume's name may be: it becomes a file
// name in Dir.
var volumeNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// workspaces makes, attaches and removes the image files of capped
// workspaces. It is safe for concurrent use.
type workspaces struct {
	cfg     WorkspaceConfig
	log     *slog.Logger
	mu      sync.Mutex  // serialises attach: the loop lookup and the link swap
	volumes keyed.Mutex // attach in Create against detach in Remove (workspace_detach.go)
	spare   spareImage  // an image formatted ahead (workspace_spare.go)
}

func (w *workspaces) paths(volume string) (img, link string) {
	base := filepath.Join(w.cfg.Dir, volume)
	return base + ".img", base + ".dev"
}

// create makes the image file of a new capped workspace, attaches it and
// returns the local driver's options for the volume. On failure nothing is
// left behind.
func (w *workspaces) create(ctx context.Context, volume string) (opts map[string]string, err error) {
	if !volumeNameRE.MatchString(volume) {
		return nil, fmt.Errorf("workspace volume name %q", volume)
	}
	if err := os.MkdirAll(w.cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace folder: %w", err)
	}
	img, link := w.paths(volume)
	taken, err := w.takeSpare(img) // workspace_spare.go
	if err != nil {
		return nil, fmt.Errorf("workspace image: %w", err)
	}
	defer w.refill()
	if !taken {
		if err := w.makeImage(ctx, img); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			w.cleanup(ctx, img, link)
		}
	}()
	if err := w.attach(ctx, img, link); err != nil {
		return nil, err
	}
	return map[string]string{"type": "ext4", "device": link, "o": mountOptions}, nil
}

// makeImage makes img, a new sparse image file of the configured size
// with an empty filesystem; on failure nothing is left.
func (w *workspaces) makeImage(ctx context.Context, img string) (err error) {
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("workspace image: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(img)
		}
	}()
	err = f.Truncate(w.cfg.Bytes) // sparse: no block is written
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("workspace image: %w", err)
	}
	return format(ctx, img)
}

// format makes an ext4 filesystem in img, empty (no lost+found) so that the
// engine copies the image's WorkspaceMount folder, with its owner, into it
// on first use, as it does for a plain volume. Lazy init leaves the inode
// tables and the journal as holes; -m 0 reserves nothing for root.
func format(ctx context.Context, img string) error {
	if _, err := run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", img); err != nil {
		return err
	}
	_, err := run(ctx, "debugfs", "-w", "-R", "rmdir lost+found", img)
	return err
}

// attach attaches img to a loop device, or finds the one it is attached to,
// and points link at it.
func (w *workspaces) attach(ctx context.Context, img, link string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	out, err := run(ctx, "losetup", "--find", "--show", "--nooverlap", img)
	if err != nil {
		return err
	}
	dev := strings.TrimSpace(out)
	if !strings.HasPrefix(dev, "/dev/loop") {
		return fmt.Errorf("losetup %s: unexpected device %q", img, dev)
	}
	if cur, err := os.Readlink(link); err == nil && cur == dev {
		return nil
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(dev, tmp); err != nil {
		return fmt.Errorf("workspace device link: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("workspace device link: %w", err)
	}
	w.log.Debug("workspace attached", "image", img, "device", dev)
	return nil
}

// reattach makes sure the loop device of an existing capped volume, named
// by its driver options, is attached and linked. It does nothing for a
// volume that is not a capped workspace.
func (w *workspaces) reattach(ctx context.Context, opts map[string]string) error {
	link, ok := cappedLink(opts)
	if !ok {
		return nil
	}
	img := strings.TrimSuffix(link, ".dev") + ".img"
	if _, err := os.Stat(img); err != nil {
		return fmt.Errorf("workspace image of %s: %w", link, err)
	}
	return w.attach(ctx, img, link)
}

// cappedLink returns the device link of a capped workspace volume's
// driver options.
func cappedLink(opts map[string]string) (string, bool) {
	link := opts["device"]
	if opts["type"] != "ext4" || !strings.HasSuffix(link, ".dev") || !filepath.IsAbs(link) {
		return "", false
	}
	return link, true
}

// release detaches and deletes the image of a removed volume. opts are the
// volume's driver options when it was found (nil when not): its link names
// the image; otherwise the image is looked for in Dir.
func (w *workspaces) release(ctx context.Context, volume string, opts map[string]string) error {
	var img, link string
	if l, ok := cappedLink(opts); ok {
		img, link = strings.TrimSuffix(l, ".dev")+".img", l
	} else if w.cfg.Dir != "" && volumeNameRE.MatchString(volume) {
		img, link = w.paths(volume)
	} else {
		return nil
	}
	return w.remove(ctx, img, link)
}

// remove detaches every loop device backed by img, then deletes the link
// and img. Missing ones are not an error. It runs to the end even when ctx
// has ended (its volume may be gone already), bounded by cleanupTimeout.
func (w *workspaces) remove(ctx context.Context, img, link string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	errs := []error{w.detach(ctx, img)}
	for _, p := range []string{link, img} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove workspace: %w", err))
		}
	}
	return errors.Join(errs...)
}

// detach detaches every loop device backed by img. A device still mounted
// is detached by the kernel when it is unmounted.
func (w *workspaces) detach(ctx context.Context, img string) error {
	devs, err := LoopDevices(img)
	if err != nil {
		return err
	}
	var errs []error
	for _, dev := range devs {
		if _, err := run(ctx, "losetup", "--detach", dev); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && len(devs) > 0 {
		w.log.Debug("workspace detached", "image", img, "devices", devs)
	}
	return errors.Join(errs...)
}

// cleanup removes what a failed create left; the caller has the error.
func (w *workspaces) cleanup(ctx context.Context, img, link string) {
	if err := w.remove(ctx, img, link); err != nil {
		w.log.Warn("remove workspace image of failed create", "image", img, "err", err)
	}
}

// probe makes, attaches and removes a throwaway workspace: what a capped
// Create needs from the host.
func (w *workspaces) probe(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "probe-" + hex.EncodeToString(b[:])
	if _, err := w.create(ctx, name); err != nil {
		return err
	}
	img, link := w.paths(name)
	return w.remove(ctx, img, link)
}

// LoopDevices returns the loop devices ("/dev/loop3") whose backing file is
// path, read from sysfs. A device whose file was deleted still counts.
func LoopDevices(path string) ([]string, error) {
	return loopsWhere(func(backing string) bool { return backing == path })
}

// LoopDevicesUnder returns the loop devices whose backing file is in the
// folder dir or below it, deleted or not (leak checks).
func LoopDevicesUnder(dir string) ([]string, error) {
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	return loopsWhere(func(backing string) bool { return strings.HasPrefix(backing, prefix) })
}

func loopsWhere(match func(backing string) bool) ([]string, error) {
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var devs []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(raw)), " (deleted)")
		if match(backing) {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs, nil
}

// run executes a host tool and returns its standard output; its error
// carries the tool's own message.
func run(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// newWorkspaces checks cfg and makes its Dir absolute, with symbolic links
// resolved (loop devices name their files that way).
func newWorkspaces(cfg WorkspaceConfig, log *slog.Logger) (*workspaces, error) {
	if cfg.Bytes < 0 || (cfg.Bytes > 0 && cfg.Bytes < MinWorkspaceBytes) {
		return nil, fmt.Errorf("workspace size %d bytes: want 0 (uncapped) or at least %d", cfg.Bytes, MinWorkspaceBytes)
	}
	if cfg.Dir != "" {
		dir, err := filepath.Abs(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("workspace folder: %w", err)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		cfg.Dir = dir
	}
	return &workspaces{cfg: cfg, log: log}, nil
}

// CheckWorkspaces makes, attaches and removes a throwaway capped workspace,
// to fail at start-up rather than at the first thread when the host cannot
// (no loop devices, not root, no mkfs.ext4, debugfs or losetup). It does
// nothing when workspaces are uncapped. It blocks for the tools' run, a few
// tens of milliseconds.
func (d *Docker) CheckWorkspaces(ctx context.Context) error {
	if !d.ws.cfg.Capped() {
		return nil
	}
	if _, err := d.ws.removeSpares(); err != nil { // left by a bridge killed
		d.log.Warn("remove old spare workspace images", "err", err)
	}
	if err := d.ws.probe(ctx); err != nil {
		return fmt.Errorf("capped workspace in %s: %w", d.ws.cfg.Dir, err)
	}
	return nil
}

// CollectWorkspaces removes the image files (and their loop devices) in
// the workspace folder that belong to no volume: what a crash between
// making an image and creating its volume leaves. It returns how many it
// removed. Run it only when no bridge uses the folder.
func (d *Docker) CollectWorkspaces(ctx context.Context) (int, error) {
	if d.ws.cfg.Dir == "" {
		return 0, nil
	}
	imgs, err := filepath.Glob(filepath.Join(d.ws.cfg.Dir, "*.img"))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, img := range imgs {
		volume := strings.TrimSuffix(filepath.Base(img), ".img")
		_, err := d.cli.VolumeInspect(ctx, volume, client.VolumeInspectOptions{})
		if err == nil {
			continue
		}
		if !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("inspect volume %s: %w", volume, d.mapErr(err, nil)))
			continue
		}
		if err := d.ws.remove(ctx, img, strings.TrimSuffix(img, ".img")+".dev"); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	spares, err := d.ws.removeSpares() // workspace_spare.go
	return n + spares, errors.Join(append(errs, err)...)
}
