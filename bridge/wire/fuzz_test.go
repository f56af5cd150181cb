package wire_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxwire/boxwire/bridge/wire"
)

// FuzzReadMessage feeds arbitrary frames to the decoder: it must never
// panic, must report a frame over the limit as ErrTooLarge, any other
// failure as a wire.Error, and must re-encode what it accepted into a frame
// that decodes to the same envelope. The golden files seed the corpus.
// CI runs it briefly (make unit). The budget is a count of executions, not a
// duration: with a duration, Go's coordinator can report "context deadline
// exceeded" when the deadline lands while a worker is minimizing a new input
// (golang/go#75804), which failed CI once.
func FuzzReadMessage(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"type":""}`, `{"type":"x","data":null}`,
		`{"type":"hello","data":{"version":1e400}}`, "{\"type\":\"\xff\"}", `{"type":"a","seq":-1}`} {
		f.Add([]byte(s))
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, frame []byte) {
		env, err := wire.ReadMessage(bytes.NewReader(frame), limit)
		if len(frame) > limit {
			if !errors.Is(err, wire.ErrTooLarge) {
				t.Fatalf("frame of %d bytes: err %v, want ErrTooLarge", len(frame), err)
			}
			return
		}
		if err != nil {
			var werr wire.Error
			if !errors.As(err, &werr) || werr.Code != wire.CodeBadMessage {
				t.Fatalf("error %v is not a bad_message wire.Error", err)
			}
			return
		}
		if env.Type == "" {
			t.Fatal("accepted an envelope without a type")
		}
		out, err := wire.Marshal(env)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := wire.Parse(out)
		if err != nil {
			t.Fatalf("re-encoded frame does not parse: %v\n%s", err, out)
		}
		if back.Type != env.Type || back.Thread != env.Thread || back.Seq != env.Seq || back.ID != env.ID {
			t.Fatalf("round trip changed the envelope: %+v -> %+v", env, back)
		}
		// Payload decoding of every known type must not panic either.
		var sink any
		switch env.Type {
		case wire.TypeHello:
			sink = &wire.Hello{}
		case wire.TypeToolResult:
			sink = &wire.ToolResult{}
		case wire.TypeUsage:
			sink = &wire.UsageReport{}
		case wire.TypeEgress:
			sink = &wire.EgressDecision{}
		default:
			sink = &wire.Error{}
		}
		_ = env.Decode(sink)
	})
}
