package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// benchPreviewDownload: a 100 MiB file from python3's http.server in the
// sandbox through the path-form preview (app → agent → port stream on the
// agent WebSocket → bridge → HTTP client), versus `docker exec … cat` of
// the same file (the engine's own way out of the container). The sides
// take turns; every byte is counted on both.
func benchPreviewDownload(t *testing.T, e *env, r *report) {
	const size = 100 << 20
	const rounds = 5
	s := e.dial("")
	id := s.conn.Thread()
	if res := s.sh(fmt.Sprintf("head -c %d /dev/urandom > /workspace/big.bin", size), 120); exitCode(res) != 0 {
		t.Fatalf("make the file: %+v", res)
	}
	s.runTool("execute", map[string]any{"command": "cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1", "background": true}, turnTimeout)
	s.awaitPorts(8000)
	container := e.threadInfo(id).SandboxID
	// download times one GET of the file through c, checking every byte.
	download := func(what string, c *http.Client, req *http.Request) time.Duration {
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s download: %v", what, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || n != size || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s download: %d, %d bytes of %d, %v", what, resp.StatusCode, n, size, err)
		}
		return took
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	ours := func() time.Duration {
		req, _ := http.NewRequest(http.MethodGet, e.bridge.url+"/v1/threads/"+id+"/ports/8000/big.bin", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		return download("preview", client, req)
	}
	dockerCat := func() time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker", "exec", container, "cat", "/workspace/big.bin")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, out)
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
		took := time.Since(start)
		if err != nil || n != size {
			t.Fatalf("docker exec cat: %d bytes of %d, %v", n, size, err)
		}
		return took
	}
	// The same download through a forward (client forward's path: a
	// WebSocket to /v1/threads/{id}/forward/8000 per connection).
	forwarded := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return chat.DialPort(ctx, chat.Config{URL: e.bridge.url + wire.Path, Token: e.token}, id, 8000)
		},
	}}
	forward := func() time.Duration {
		req, _ := http.NewRequest(http.MethodGet, "http://sandbox:8000/big.bin", nil)
		return download("forward", forwarded, req)
	}
	ours()
	forward()
	dockerCat() // warm them (page cache, connections)
	out := interleaveAll(t, rounds, ours, forward, dockerCat)
	via, fwd, direct := out[0], out[1], out[2]
	mibps := func(ms float64) float64 { return float64(size) / (1 << 20) / (ms / 1000) }
	ratio := mibps(medianMS(via)) / mibps(medianMS(direct))
	r.add(figure{name: "preview_download", value: mibps(medianMS(via)), unit: "MiB/s", ratio: ratio,
		samples: perRound(via, func(d time.Duration) float64 { return mibps(float64(d) / float64(time.Millisecond)) }),
		target:  "≥ 0.8× docker exec cat of the same file, every byte", met: met(ratio >= 0.8),
		note: fmt.Sprintf("100 MiB from python3 -m http.server through the path-form preview %.1f MiB/s vs docker exec cat %.1f MiB/s, medians of %d",
			mibps(medianMS(via)), mibps(medianMS(direct)), rounds)})
	r.add(figure{name: "forward_download", value: mibps(medianMS(fwd)), unit: "MiB/s", ratio: mibps(medianMS(fwd)) / mibps(medianMS(direct)),
		samples: perRound(fwd, func(d time.Duration) float64 { return mibps(float64(d) / float64(time.Millisecond)) }),
		note:    fmt.Sprintf("the same file through a forward (client forward's WebSocket, chat.DialPort) %.1f MiB/s, in the same rounds", mibps(medianMS(fwd)))})
}
