package e2e_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The image on its own, as README "Standalone" runs it: `docker run` with
// a token and the model key from files, the agent on TCP, and the real
// client chatting with it — no bridge. The container shares the host's
// network so it reaches the scripted model on loopback.
func TestStandaloneDockerRun(t *testing.T) {
	e := newEnv(t, helloScript)
	port := freePort(t)
	secrets := t.TempDir()
	if err := os.Chmod(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"key": e.apiKey, "token": e.token} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	name := "boxwire-e2e-standalone-" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--rm", "--name", name, "--network", "host",
		"-v", filepath.Join(secrets, "key")+":/run/secrets/key:ro", "-v", filepath.Join(secrets, "token")+":/run/secrets/token:ro",
		"-e", "OPENAI_API_KEY_FILE=/run/secrets/key", "-e", "BOXWIRE_TOKEN_FILE=/run/secrets/token",
		"-e", "OPENAI_BASE_URL="+e.llmURL, "-e", "BOXWIRE_MODEL=scripted",
		"-e", "BOXWIRE_LISTEN=127.0.0.1:"+strconv.Itoa(port), image).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	url := "ws://127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, "the standalone agent to listen", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	stdout, stderr, code := e.runClient("--url", url, "-m", "hello")
	if code != 0 {
		logs, _ := exec.Command("docker", "logs", name).CombinedOutput()
		t.Fatalf("client: exit %d\nstdout:\n%s\nstderr:\n%s\nagent log:\n%s", code, stdout, stderr, logs)
	}
	if !strings.Contains(stdout, "/workspace/x now says hello") {
		t.Errorf("client printed %q, want the scripted answer", stdout)
	}
	if got := len(e.llm.Requests()); got == 0 {
		t.Error("the scripted model was never asked")
	}

	// The token is required: a client with another is refused.
	bad := exec.Command(clientBinary(t), "--url", url, "-m", "hello")
	bad.Env = append(e.clientEnv(), "BOXWIRE_TOKEN=wrong")
	if err := bad.Run(); err == nil {
		t.Error("a client with the wrong token was served")
	}
	// The key stays out of the container's environment (it came as a file).
	env, _ := exec.Command("docker", "exec", name, "cat", "/proc/1/environ").CombinedOutput()
	if strings.Contains(string(env), e.apiKey) {
		t.Error("the model key is in PID 1's environment")
	}
}

// freePort is a TCP port on loopback nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
