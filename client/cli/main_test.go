package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxwire/boxwire/client/cli"
)

// runMain runs cli.Main with args and no environment, its output in files,
// and returns the exit code, stdout and stderr.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	open := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	stdin, stdout, stderr := open("in"), open("out"), open("err")
	t.Setenv("XDG_CONFIG_HOME", dir) // no config file of the host's
	code := cli.Main(context.Background(), cli.Program{Args: args, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return code, read("out"), read("err")
}

// Bad usage is refused with exit code 2 and says why, before any
// connection: the usage lists every sub-command.
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown sub-command", []string{"frobnicate"}, []string{"usage: client", "cp LOCAL THREAD:PATH", "shell [--thread ID]", "whoami", "--thread ID --image IMAGE"}},
		{"empty -m", []string{"-m", ""}, []string{"usage: client"}},
		{"new-thread flags on an existing thread", []string{"--thread", "t_1", "--image", "x", "--ttl", "5m"}, []string{"--thread attaches to an existing thread", "--image alone moves it"}},
		{"bad --ttl", []string{"--ttl", "soon"}, []string{`--ttl "soon"`}},
		{"unknown flag", []string{"--nope"}, []string{"flag provided but not defined: -nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMain(t, tc.args...)
			if code != cli.ExitUsage || out != "" {
				t.Fatalf("exit %d, stdout %q; want %d and nothing", code, out, cli.ExitUsage)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
	if code, _, errOut := runMain(t, "-h"); code != cli.ExitOK || !strings.Contains(errOut, "-thread") {
		t.Errorf("-h: exit %d, stderr %q", code, errOut)
	}
}
