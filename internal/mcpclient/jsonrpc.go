package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of the JSON-RPC traffic over stdio.
const (
	// MaxMessageBytes is the longest line (one message) a server may
	// send; a longer one ends the session.
	MaxMessageBytes = 32 << 20
	// outQueue is how many messages wait for the writer.
	outQueue = 16
	// cancelWait bounds queueing a notifications/cancelled.
	cancelWait = time.Second
)

// JSON-RPC 2.0 error codes the client answers or names.
const (
	codeMethodNotFound = -32601
)

// RPCError is a JSON-RPC error a server answered a request with.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (JSON-RPC error %d)", e.Message, e.Code) }

// inbound is any message a server sends: a response (ID with Result or
// Error), a request (ID and Method) or a notification (Method alone).
type inbound struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// outbound is a request (ID and Method), a notification (Method) or a
// response (ID, the server's own, and Result or Error) the client sends.
type outbound struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// rpcConn is a JSON-RPC 2.0 connection over newline-delimited JSON: one
// reader goroutine (read) and one writer goroutine (write), which its
// owner starts and waits for. It is safe for concurrent use.
type rpcConn struct {
	log      *slog.Logger
	notified func(method string, params json.RawMessage) // from the reader goroutine
	out      chan []byte
	stopped  chan struct{} // closed by stop: the writer returns
	ended    chan struct{} // closed by end: calls return endErr
	endErr   error
	nextID   atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan *inbound
	once    sync.Once
}

func newRPCConn(log *slog.Logger, notified func(string, json.RawMessage)) *rpcConn {
	return &rpcConn{log: log, notified: notified, out: make(chan []byte, outQueue),
		stopped: make(chan struct{}), ended: make(chan struct{}), pending: map[int64]chan *inbound{}}
}

// call sends method with params and decodes the result into result. It
// blocks until the answer, the connection's end or ctx's end; then the
// request is cancelled on the server (notifications/cancelled).
func (c *rpcConn) call(ctx context.Context, method string, params, result any) error {
	id := c.nextID.Add(1)
	answer := make(chan *inbound, 1)
	c.mu.Lock()
	c.pending[id] = answer
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.send(ctx, outbound{ID: strconv.AppendInt(nil, id, 10), Method: method, Params: params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case msg := <-answer:
		if msg.Error != nil {
			return fmt.Errorf("%s: %w", method, msg.Error)
		}
		if result != nil {
			if err := json.Unmarshal(msg.Result, result); err != nil {
				return fmt.Errorf("%s: the server's result: %w", method, err)
			}
		}
		return nil
	case <-c.ended:
		return fmt.Errorf("%s: %w", method, c.endErr)
	case <-ctx.Done():
		cctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		defer cancel()
		_ = c.send(cctx, outbound{Method: "notifications/cancelled",
			Params: map[string]any{"requestId": id, "reason": ctx.Err().Error()}})
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// notify sends a notification.
func (c *rpcConn) notify(ctx context.Context, method string, params any) error {
	if err := c.send(ctx, outbound{Method: method, Params: params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// send queues m for the writer; it blocks while the queue is full.
func (c *rpcConn) send(ctx context.Context, m outbound) error {
	m.JSONRPC = "2.0"
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	select {
	case c.out <- append(raw, '\n'):
		return nil
	case <-c.ended:
		return c.endErr
	case <-c.stopped: // the end follows
		select {
		case <-c.ended:
			return c.endErr
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write writes the queued messages to w until stop; a failed write stops
// writing (the reader sees the server's end).
func (c *rpcConn) write(w io.Writer) {
	for {
		select {
		case raw := <-c.out:
			if _, err := w.Write(raw); err != nil {
				c.log.Debug("MCP server's stdin", "err", err)
				<-c.stopped
				return
			}
		case <-c.stopped:
			return
		}
	}
}

// stop ends the writer; it is idempotent.
func (c *rpcConn) stop() { c.once.Do(func() { close(c.stopped) }) }

// end has every call, now and later, fail with err (which wraps
// ErrEnded); once only, after read returned.
func (c *rpcConn) end(err error) {
	c.endErr = err
	close(c.ended)
}

// read reads r's messages, one a line, until it ends or a line is longer
// than MaxMessageBytes, and returns why (nil at EOF).
func (c *rpcConn) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxMessageBytes)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		switch {
		case len(line) == 0:
		case line[0] == '[': // a batch (MCP 2025-03-26)
			var batch []json.RawMessage
			if err := json.Unmarshal(line, &batch); err != nil {
				c.log.Warn("an MCP server wrote a line that is not JSON-RPC; skipped", "err", err, "line", clip(line))
			}
			for _, m := range batch {
				c.handle(m)
			}
		default:
			c.handle(line)
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("the server sent a message longer than %d bytes", MaxMessageBytes)
	}
	return sc.Err()
}

// handle routes one message: a response to its call, a request answered
// (ping, or "method not found"), a notification to notified.
func (c *rpcConn) handle(raw []byte) {
	var m inbound
	if err := json.Unmarshal(raw, &m); err != nil {
		c.log.Warn("an MCP server wrote a line that is not JSON-RPC; skipped", "err", err, "line", clip(raw))
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method == "" && hasID:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		c.mu.Lock()
		answer := c.pending[id]
		c.mu.Unlock()
		if err != nil || answer == nil {
			c.log.Debug("an MCP server answered no pending request", "id", string(m.ID))
			return
		}
		select {
		case answer <- &m:
		default: // a second answer to one request
		}
	case m.Method != "" && hasID:
		reply := outbound{ID: m.ID, Result: json.RawMessage(`{}`)}
		if m.Method != "ping" {
			reply = outbound{ID: m.ID, Error: &RPCError{Code: codeMethodNotFound, Message: "method not found: " + m.Method}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
		_ = c.send(ctx, reply)
		cancel()
	case m.Method != "":
		c.notified(m.Method, m.Params)
	}
}

// clip is the start of a line, for a log.
func clip(line []byte) string {
	if len(line) > 200 {
		return string(line[:200]) + "…"
	}
	return string(line)
}
