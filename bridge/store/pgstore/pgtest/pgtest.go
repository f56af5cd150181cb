// Package pgtest starts a real PostgreSQL server for tests: Debian's
// postgresql package (installed with apt-get when no initdb is found), a
// cluster made by initdb in a temporary folder, served on a free loopback
// port and a socket in that folder, run as the postgres system user when
// the tests run as root (PostgreSQL refuses root). Tests that need it are
// opt-in: they run when BOXWIRE_PG_TESTS=1 (make unit sets it).
//
// It does not import testing; test files and harnesses (TestMain) use it.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar switches the PostgreSQL tests on when it is "1".
const EnvVar = "BOXWIRE_PG_TESTS"

// Enabled reports whether the PostgreSQL tests should run.
func Enabled() bool { return os.Getenv(EnvVar) == "1" }

// Server is a running PostgreSQL server; Stop stops it and removes its
// folder.
type Server struct {
	cfg            Config
	dir, data, bin string
	port           int
	as             []string // command prefix running as the server's user
	n              atomic.Int64
}

// Config chooses how StartConfig runs a server; the zero value is Start's.
type Config struct {
	// Durable keeps fsync on, as a production server has it: a commit
	// that waits for durability waits for the disk (the benchmarks'
	// append figure). Off by default: tests need no durability across a
	// power loss, and run faster without.
	Durable bool
}

// Start installs PostgreSQL if needed, makes a cluster in a new temporary
// folder and starts it on a free loopback port. It takes some seconds
// (minutes when it installs).
func Start(ctx context.Context) (*Server, error) { return StartConfig(ctx, Config{}) }

// StartConfig is Start with cfg.
func StartConfig(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := findOrInstall(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, bin: bin}
	if s.dir, err = os.MkdirTemp("", "boxwire-pg-"); err != nil {
		return nil, err
	}
	s.data = filepath.Join(s.dir, "data")
	if os.Geteuid() == 0 {
		if err := s.runAsPostgres(); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	if err := s.run(ctx, "initdb", "-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if s.port, err = freePort(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// runAsPostgres makes the server run as the postgres system user (the
// package creates it) and gives it the folder.
func (s *Server) runAsPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	s.as = []string{"runuser", "-u", "postgres", "--"}
	return nil
}

// start starts the server and waits until it accepts connections.
func (s *Server) start(ctx context.Context) error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", s.port, s.dir)
	if !s.cfg.Durable {
		opts += " -c fsync=off"
	}
	return s.run(ctx, "pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "-o", opts, "start")
}

// Stop stops the server (fast shutdown) and removes its folder.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.run(ctx, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Restart stops the server and starts it again on the same port (for
// tests of a database that goes away and comes back).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Down(ctx); err != nil {
		return err
	}
	return s.Up(ctx)
}

// Down stops the server (fast shutdown: clients are disconnected) and
// keeps its folder; Up starts it again on the same port.
func (s *Server) Down(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
}

// Up starts a server Down stopped and waits until it accepts connections.
func (s *Server) Up(ctx context.Context) error { return s.start(ctx) }

// URL is the address of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabase creates an empty database with a fresh name and returns its
// URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test_%d", s.n.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.URL(name), nil
}

// run runs one of the server's programs, as its user.
func (s *Server) run(ctx context.Context, prog string, args ...string) error {
	argv := append(append(append([]string{}, s.as...), filepath.Join(s.bin, prog)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = os.TempDir() // the server's user may not enter ours
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pgtest: %s: %w\n%s\n%s", prog, err, out.Bytes(), log)
	}
	return nil
}

// findOrInstall returns the folder of the newest installed PostgreSQL's
// programs, installing Debian's postgresql package when there is none.
func findOrInstall(ctx context.Context) (string, error) {
	if bin := find(); bin != "" {
		return bin, nil
	}
	// Under image/apt.sh's lock, so this waits for the other installs of
	// make test (and dpkg's lock for anything else) instead of failing.
	const install = "apt-get -o DPkg::Lock::Timeout=600 -y -qq install postgresql >/dev/null 2>&1 ||" +
		" { apt-get update -qq && apt-get -o DPkg::Lock::Timeout=600 -y -qq install postgresql; }"
	cmd := exec.CommandContext(ctx, "flock", "-w", "900", "/run/lock/boxwire-apt.lock", "sh", "-c", install)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pgtest: no PostgreSQL found and installing it failed: %w\n%s", err, out)
	}
	if bin := find(); bin != "" {
		return bin, nil
	}
	return "", errors.New("pgtest: postgresql installed, but no /usr/lib/postgresql/*/bin/initdb")
}

func find() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) < version(found[j]) })
	if len(found) == 0 {
		return ""
	}
	return filepath.Dir(found[len(found)-1])
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
