package e2e_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
)

// streamRounds is how many times each side of the shell stream runs; the
// figures are medians, and the ratio to the reference bridge is also
// checked round by round (the target holds in every round).
// BOXWIRE_BENCH_STREAM_ROUNDS changes it (e.g. 1 while profiling, more for
// a wider spread); make bench uses the default.
var streamRounds = benchStreamRounds()

func benchStreamRounds() int {
	if n, err := strconv.Atoi(os.Getenv("BOXWIRE_BENCH_STREAM_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// benchShellStream: `head -c 256M /dev/zero` in a terminal session,
// container → agent → bridge → client, versus the same command read from a
// local PTY in this process, and versus a minimal one-hop PTY→WebSocket
// bridge on this host (../shared/bench/ptyws, which make bench builds into
// build/ and names in BOXWIRE_REF_PTYWS), read by the same WebSocket
// library our client uses. The three sides take turns, round by round, the
// first one changing every round. Every byte must arrive on every side.
func benchShellStream(t *testing.T, e *env, r *report) {
	const size = 256 << 20
	cmd := fmt.Sprintf("head -c %d /dev/zero", size)
	s := e.dial("")
	ref := startRefBridge(t, size)
	var frames int64 // of ours, all rounds
	sides := []func() time.Duration{
		func() time.Duration { // ours
			st := streamTerminalStats(t, e, s, cmd)
			if st.bytes != size {
				t.Fatalf("terminal delivered %d bytes of %d", st.bytes, size)
			}
			frames += st.frames
			return st.took
		},
		func() time.Duration {
			n, took := localPTY(t, cmd)
			if n != size {
				t.Fatalf("local PTY read %d bytes of %d", n, size)
			}
			return took
		},
		func() time.Duration {
			n, took := ref.stream(t)
			if n != size {
				t.Fatalf("reference bridge delivered %d bytes of %d", n, size)
			}
			return took
		},
	}
	took := make([][]time.Duration, len(sides))
	for round := range streamRounds {
		for i := range sides {
			side := (round + i) % len(sides)
			took[side] = append(took[side], sides[side]())
		}
	}
	ours, local, refs := took[0], took[1], took[2]
	mibps := func(ms float64) float64 { return float64(size) / (1 << 20) / (ms / 1000) }
	rate := func(d time.Duration) float64 { return mibps(float64(d) / float64(time.Millisecond)) }
	ratio := mibps(medianMS(ours)) / mibps(medianMS(local))
	r.add(figure{name: "shell_stream", value: mibps(medianMS(ours)), unit: "MiB/s", ratio: ratio, samples: perRound(ours, rate),
		target: "≥ 0.8× a local PTY, every byte", met: met(ratio >= 0.8),
		note: fmt.Sprintf("256 MiB through container→bridge→client %.1f MiB/s vs a local PTY %.1f MiB/s, medians of %d, all bytes counted; ours per round %s; frames of %.1f KiB on average",
			mibps(medianMS(ours)), mibps(medianMS(local)), streamRounds, rates(ours, rate), float64(size)*float64(streamRounds)/float64(max(frames, 1))/1024)})
	worst := 0.0
	for i := range ours {
		if q := rate(ours[i]) / rate(refs[i]); i == 0 || q < worst {
			worst = q
		}
	}
	refRatio := mibps(medianMS(ours)) / mibps(medianMS(refs))
	r.add(figure{name: "shell_stream_vs_ref", value: mibps(medianMS(ours)), unit: "MiB/s", ratio: refRatio, samples: perRound(ours, rate),
		extra: fmt.Sprintf("ref=%.3f MiB/s", mibps(medianMS(refs))), after: fmt.Sprintf("worst_round=%.3f", worst),
		target: "≥ 0.8× the reference bridge in every round, every byte", met: met(worst >= 0.8),
		note: fmt.Sprintf("ours %.1f MiB/s vs the one-hop reference bridge %.1f MiB/s (medians of %d); round by round ours/ref %s, worst %.3f",
			mibps(medianMS(ours)), mibps(medianMS(refs)), streamRounds, roundRatios(ours, refs, rate), worst)})
}

func rates(ds []time.Duration, rate func(time.Duration) float64) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += strconv.FormatFloat(rate(d), 'f', 1, 64)
	}
	return out
}

func roundRatios(ours, refs []time.Duration, rate func(time.Duration) float64) string {
	out := ""
	for i := range ours {
		if i > 0 {
			out += " "
		}
		out += strconv.FormatFloat(rate(ours[i])/rate(refs[i]), 'f', 2, 64)
	}
	return out
}

// localPTY runs cmd on a PTY of this process and reads it to the end.
func localPTY(t *testing.T, cmd string) (int64, time.Duration) {
	start := time.Now()
	ptmx, err := pty.Start(exec.Command("sh", "-c", cmd))
	if err != nil {
		t.Fatalf("local pty: %v", err)
	}
	defer ptmx.Close()
	n, _ := io.Copy(io.Discard, ptmx) // ends with EIO once the child side closes
	return n, time.Since(start)
}

// refBridge is a running reference bridge (ptyws) that runs head -c size
// /dev/zero on a PTY for each WebSocket connection.
type refBridge struct{ url string }

// startRefBridge starts BOXWIRE_REF_PTYWS on a free loopback port and
// waits until it answers; the test's cleanup stops it.
func startRefBridge(t *testing.T, size int) *refBridge {
	t.Helper()
	bin := os.Getenv("BOXWIRE_REF_PTYWS")
	if bin == "" {
		t.Fatal("BOXWIRE_REF_PTYWS is not set: make bench builds the reference bridge (../shared/bench/ptyws) into build/ and sets it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-addr", addr, "--", "head", "-c", strconv.Itoa(size), "/dev/zero")
	startProcess(t, cmd, "the reference bridge")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return &refBridge{url: "ws://" + addr + "/ws"}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference bridge does not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stream connects, which starts the command, and counts the bytes of the
// binary frames until the bridge closes the connection, as ttyclient does.
func (b *refBridge) stream(t *testing.T) (int64, time.Duration) {
	t.Helper()
	start := time.Now()
	c, _, err := websocket.DefaultDialer.Dial(b.url, nil)
	if err != nil {
		t.Fatalf("dial the reference bridge: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(start.Add(5 * time.Minute))
	var n int64
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			break // its close frame after the last output
		}
		if kind == websocket.BinaryMessage {
			n += int64(len(data))
		}
	}
	took := time.Since(start)
	time.Sleep(300 * time.Millisecond) // let it reap the command, as ttyclient does
	return n, took
}
