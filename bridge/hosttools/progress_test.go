package hosttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxwire/boxwire/bridge/hosttools"
	"github.com/boxwire/boxwire/bridge/wire"
)

// burstServer is a streamable-HTTP MCP server whose tool "burst" sends n
// progress messages ("<tag> <i>") and answers at once: the client SDK
// handles notifications apart from responses, so some are handled after
// the call's result.
func burstServer(t *testing.T, n int) *hosttools.Host {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "burst"}, nil)
	type args struct {
		Tag string `json:"tag"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "burst"}, func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		for i := range n {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Message: fmt.Sprintf("%s %d", in.Tag, i), Progress: float64(i)})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + in.Tag}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	servers, err := hosttools.Parse([]byte(fmt.Sprintf(`{"servers":[{"name":"burst","url":%q}]}`, hs.URL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := hosttools.New(hosttools.Config{Servers: servers})
	t.Cleanup(func() { h.Close() })
	return h
}

// TestNoProgressAfterTheResult: a progress message the SDK hands over
// after the call's result is dropped, so the agent never gets a
// host_progress after the host_result of the same call (the bridge sends
// them in the order Call hands them over).
func TestNoProgressAfterTheResult(t *testing.T) {
	h := burstServer(t, 200)
	for round := range 5 {
		var (
			mu       sync.Mutex
			returned bool
			late     []string
		)
		res := h.Call(context.Background(), hosttools.Scope{}, wire.HostCall{CallID: "c", Name: "burst", Arguments: json.RawMessage(`{"tag":"p"}`)},
			func(m string) {
				time.Sleep(time.Millisecond) // a relay that takes its time: the SDK's queue falls behind
				mu.Lock()
				if returned {
					late = append(late, m)
				}
				mu.Unlock()
			})
		mu.Lock()
		returned = true
		mu.Unlock()
		if res.Output != "done p" {
			t.Fatalf("round %d: %+v", round, res)
		}
		time.Sleep(300 * time.Millisecond) // what the SDK still holds is handed over by now
		mu.Lock()
		if len(late) > 0 {
			t.Errorf("round %d: %d progress messages after the result, the first %q", round, len(late), late[0])
		}
		mu.Unlock()
	}
}

// TestProgressOfAlikeCallIDs: two threads' calls with the same call id on
// one server each get their own progress only.
func TestProgressOfAlikeCallIDs(t *testing.T) {
	h := burstServer(t, 20)
	var wg sync.WaitGroup
	for _, tag := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			var got []string
			h.Call(context.Background(), hosttools.Scope{Thread: "t_" + tag}, wire.HostCall{CallID: "call_1", Name: "burst", Arguments: json.RawMessage(`{"tag":"` + tag + `"}`)},
				func(m string) { mu.Lock(); got = append(got, m); mu.Unlock() })
			mu.Lock()
			defer mu.Unlock()
			for _, m := range got {
				if !strings.HasPrefix(m, tag+" ") {
					t.Errorf("call %s got %q", tag, m)
				}
			}
		}()
	}
	wg.Wait()
}
