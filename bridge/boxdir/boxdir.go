package boxdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Defaults of the agent folder's tmpfs: room for a socket and little else.
const (
	DefaultAgentBytes  = 256 << 10
	DefaultAgentInodes = 64
)

// socketMode lets the sandbox's user connect to the bridge's sockets. The
// folder, which only the bridge can write, is what keeps others out: each
// sandbox mounts only its own.
const socketMode = 0o666

// Config says where the folders live and whose they are.
type Config struct {
	// Root is the bridge's data folder; folders go in Root/run and
	// Root/agent.
	Root string
	// UID and GID are the sandbox's user, the owner of the agent folder.
	UID, GID int
	// AgentBytes and AgentInodes cap the agent folder's tmpfs; zero means
	// DefaultAgentBytes and DefaultAgentInodes.
	AgentBytes  int64
	AgentInodes int
	// Private makes the agent folder a plain folder of the bridge's (mode
	// 0700, no tmpfs), for engines that never mount it into a sandbox
	// (Kubernetes: the folder holds only the manager's own listener, the
	// pod has folders of its own). It needs no root: nothing is mounted.
	Private bool
}

// Layout makes, checks and removes the folders of sandboxes. The zero value
// is not usable; use New.
type Layout struct {
	cfg Config
}

// New returns the layout of cfg.
func New(cfg Config) *Layout {
	if cfg.AgentBytes <= 0 {
		cfg.AgentBytes = DefaultAgentBytes
	}
	if cfg.AgentInodes <= 0 {
		cfg.AgentInodes = DefaultAgentInodes
	}
	return &Layout{cfg: cfg}
}

// At is l with its folders under root: another bridge's data folder,
// for a sandbox that bridge made and this one takes over.
func (l *Layout) At(root string) *Layout {
	c := l.cfg
	c.Root = root
	return &Layout{cfg: c}
}

// Root is the folder the sandboxes' folders are under: Config.Root of the
// Layout that made d.
func (d Dirs) Root() string { return filepath.Dir(filepath.Dir(d.Bridge)) }

// Dirs are the host folders of one sandbox.
type Dirs struct {
	// Bridge is the bridge folder (mounted read-only at
	// sandbox.SocketMount).
	Bridge string
	// Agent is the agent folder (a tmpfs mounted read-write at
	// sandbox.AgentMount).
	Agent string
}

// ID is the sandbox id the folders are named after.
func (d Dirs) ID() string { return filepath.Base(d.Bridge) }

// Paths returns the folders of id without touching the filesystem.
func (l *Layout) Paths(id string) Dirs {
	return Dirs{Bridge: filepath.Join(l.cfg.Root, "run", id), Agent: filepath.Join(l.cfg.Root, "agent", id)}
}

// Make creates the folders of id, removing any left from before (a
// suspended thread's box that failed to go). On failure nothing is left.
func (l *Layout) Make(id string) (d Dirs, err error) {
	if !validID(id) {
		return Dirs{}, fmt.Errorf("sandbox folder: bad id %q", id)
	}
	d = l.Paths(id)
	if err := l.Remove(id); err != nil {
		return Dirs{}, fmt.Errorf("remove old folders of %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = l.Remove(id)
		}
	}()
	for _, parent := range []string{filepath.Dir(d.Bridge), filepath.Dir(d.Agent)} {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return Dirs{}, fmt.Errorf("create %s: %w", parent, err)
		}
	}
	if err := os.Mkdir(d.Bridge, 0o755); err != nil {
		return Dirs{}, fmt.Errorf("create bridge folder: %w", err)
	}
	// Mkdir's mode is cut by the umask; the folder must be exactly this.
	if err := os.Chmod(d.Bridge, 0o755); err != nil {
		return Dirs{}, fmt.Errorf("set mode of bridge folder: %w", err)
	}
	if err := os.Mkdir(d.Agent, 0o700); err != nil {
		return Dirs{}, fmt.Errorf("create agent folder: %w", err)
	}
	if l.cfg.Private {
		if err := os.Chmod(d.Agent, 0o700); err != nil {
			return Dirs{}, fmt.Errorf("set mode of agent folder: %w", err)
		}
		return d, nil
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d",
		l.cfg.AgentBytes, l.cfg.AgentInodes, l.cfg.UID, l.cfg.GID)
	if err := unix.Mount("tmpfs", d.Agent, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return Dirs{}, fmt.Errorf("mount the agent folder's tmpfs on %s (the bridge needs root): %w", d.Agent, err)
	}
	return d, nil
}

// Open returns the folders of a sandbox made earlier (by this or an
// earlier bridge process) after checking that they are laid out as Make
// lays them out: a bridge folder no one else can write and an agent folder
// that is a tmpfs of its own (Config.Private: a folder only the bridge
// can enter). A sandbox made by an older bridge, whose
// single folder it could write, fails the check; it must be replaced, not
// adopted.
func (l *Layout) Open(id string) (Dirs, error) {
	if !validID(id) {
		return Dirs{}, fmt.Errorf("sandbox folder: bad id %q", id)
	}
	d := l.Paths(id)
	var st unix.Stat_t
	if err := unix.Lstat(d.Bridge, &st); err != nil {
		return Dirs{}, fmt.Errorf("bridge folder %s: %w", d.Bridge, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return Dirs{}, fmt.Errorf("bridge folder %s is not a folder", d.Bridge)
	case int(st.Uid) != os.Geteuid():
		return Dirs{}, fmt.Errorf("bridge folder %s is not the bridge's own (owner %d)", d.Bridge, st.Uid)
	case st.Mode&0o022 != 0:
		return Dirs{}, fmt.Errorf("bridge folder %s is writable by others (mode %o)", d.Bridge, st.Mode&0o777)
	}
	check := isOwnTmpfs
	if l.cfg.Private {
		check = isPrivateDir
	}
	if err := check(d.Agent); err != nil {
		return Dirs{}, fmt.Errorf("agent folder: %w", err)
	}
	return d, nil
}

// isOwnTmpfs reports an error unless dir is a real folder (not a link) on
// which a tmpfs is mounted.
func isOwnTmpfs(dir string) error {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Dev == parent.Dev || sfs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("%s is not a tmpfs of its own", dir)
	}
	return nil
}

// isPrivateDir reports an error unless dir is a real folder (not a link)
// of the bridge's that no one else may enter.
func isPrivateDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a folder", dir)
	case int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0:
		return fmt.Errorf("%s is not the bridge's alone (owner %d, mode %o)", dir, st.Uid, st.Mode&0o777)
	}
	return nil
}

// Remove unmounts and deletes the folders of id. Folders already gone are
// not an error. It never follows a link the sandbox made: the agent folder
// is unmounted (not walked) before the empty mount point is removed.
func (l *Layout) Remove(id string) error {
	if !validID(id) {
		return fmt.Errorf("sandbox folder: bad id %q", id)
	}
	return l.Paths(id).Remove()
}

// Remove unmounts and deletes d's folders, as Layout.Remove does.
func (d Dirs) Remove() error {
	var errs []error
	if err := unmountAll(d.Agent); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(d.Agent); err != nil { // RemoveAll does not follow links
		errs = append(errs, fmt.Errorf("remove agent folder: %w", err))
	}
	if err := os.RemoveAll(d.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("remove bridge folder: %w", err))
	}
	return errors.Join(errs...)
}

// unmountAll lazily unmounts every mount stacked on dir (a crashed bridge
// may have mounted twice), without following a link at dir. A dir that is
// no mount point is left alone without an unmount call (which needs
// CAP_SYS_ADMIN even then: a bridge without it has only Private folders).
func unmountAll(dir string) error {
	for range 8 {
		if !isMountPoint(dir) {
			return nil
		}
		err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not (or no longer) a mount point, or gone
		default:
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 8 unmounts", dir)
}

// isMountPoint says whether dir (not followed if a link) is on another
// device than its parent folder: a tmpfs Make mounted. A dir that cannot
// be read counts as one, so that unmountAll tries.
func isMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return !errors.Is(err, unix.ENOENT)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return true
	}
	return st.Dev != parent.Dev
}

// IDs returns the ids that have a folder of either kind, for removing
// those of no live sandbox.
func (l *Layout) IDs() ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	for _, sub := range []string{"run", "agent"} {
		entries, err := os.ReadDir(filepath.Join(l.cfg.Root, sub))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("list sandbox folders: %w", err)
		}
		for _, e := range entries {
			if validID(e.Name()) && !seen[e.Name()] {
				seen[e.Name()] = true
				ids = append(ids, e.Name())
			}
		}
	}
	return ids, nil
}

// RemoveAll removes every sandbox folder under root: what `bridge gc` does.
func RemoveAll(root string) error {
	l := New(Config{Root: root})
	ids, err := l.IDs()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, l.Remove(id))
	}
	return errors.Join(errs...)
}

// WriteFile puts data in the bridge folder under name with mode, whole:
// it writes a new file and renames it over the old one, so a reader never
// sees half of it and nothing is written through a link or into a file
// that has other names.
func (d Dirs) WriteFile(name string, data []byte, mode os.FileMode) error {
	path := filepath.Join(d.Bridge, name)
	f, err := os.CreateTemp(d.Bridge, "."+name+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Listen listens on a unix socket name in the bridge folder (replacing a
// stale one), connectable by the sandbox's user. The caller closes it;
// closing leaves the socket file (Remove, or the next Listen, removes it):
// another bridge that took the sandbox over may listen there by then, and
// its socket must stay.
func (d Dirs) Listen(name string) (*net.UnixListener, error) {
	path := filepath.Join(d.Bridge, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	// By name, which is safe here only because the folder is the bridge's
	// alone (Make, Open): nothing can swap the socket for a link.
	if err := os.Chmod(path, socketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// DialAgent connects to the socket name in the agent folder. The sandbox
// writes that folder, so the name is opened without following a link,
// must be a socket, and is connected to through the open descriptor: a
// link planted there (to a host socket, say) is refused, and a rename
// between the check and the connect changes nothing.
func (d Dirs) DialAgent(ctx context.Context, name string) (net.Conn, error) {
	path := filepath.Join(d.Agent, name)
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open agent socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat agent socket %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("agent socket %s: %w", path, ErrNotSocket)
	}
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("dial agent socket %s: %w", path, err)
	}
	return conn, nil
}

// ErrNotSocket means the agent folder holds something other than a socket
// under the agent socket's name (a link, a file): it is never connected to.
var ErrNotSocket = errors.New("not a socket")

// validID keeps ids to one plain path element.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}
