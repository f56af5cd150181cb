package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/failover"
	"github.com/boxwire/boxwire/bridge/internal/wsrelay"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A client's upstream (client.go): the connection to the
// thread's relay its requests go over, carried by the relay goroutine and
// dialled again, to whichever bridge relays the thread then, when it ends.

// awaitUpstream returns the upstream, waiting at most upstreamWait while
// there is none; nil when none came.
func (c *Client) awaitUpstream() *websocket.Conn {
	c.mu.Lock()
	up, ready := c.up, c.upReady
	c.mu.Unlock()
	if up != nil {
		return up
	}
	timer := time.NewTimer(upstreamWait)
	defer timer.Stop()
	select {
	case <-ready:
	case <-timer.C:
	case <-c.stop:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

func (c *Client) setUpstream(up *websocket.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up = up
	close(c.upReady)
}

func (c *Client) clearUpstream(up *websocket.Conn) {
	c.mu.Lock()
	if c.up == up {
		c.up, c.upReady = nil, make(chan struct{})
	}
	c.mu.Unlock()
	up.Close()
}

// relay carries the upstream up, and when it ends, finds the thread's
// relay again and dials it, until the client is kicked; a close the client
// must see (carry) is passed on, and so is a thread that is gone.
func (c *Client) relay(up *websocket.Conn) {
	for {
		if up != nil {
			code, text, again := c.carry(up)
			if !again {
				c.kick(code, text, true)
				return
			}
			up = nil
			if c.ctx.Err() != nil {
				return
			}
			c.log.Info("forwarded client: the thread's relay went away; finding the next")
			c.answer(wire.ErrorEnvelope(c.thread, "", wire.CodeSandboxUnavailable,
				"the bridge relaying thread %s went away: its terminals are closed (open them again); events go on, and requests wait for the bridge that relays it next", c.thread))
		}
		addr, err := c.h.cfg.Relays.Address(c.ctx, c.thread)
		switch {
		case errors.Is(err, ErrThreadGone):
			c.answer(wire.ErrorEnvelope(c.thread, "", wire.CodeNotFound, "thread %s is gone", c.thread))
			c.kick(websocket.CloseNormalClosure, "thread closed", true)
			return
		case errors.Is(err, ErrNoAddress):
			c.kick(websocket.CloseGoingAway, failover.MovedText, true)
			return
		}
		if addr != "" {
			if up, err = c.Dial(c.ctx, addr); err == nil {
				c.log.Info("forwarded client: requests go to the thread's relay again", "relay", addr)
				continue
			}
			if c.refused(err) {
				return
			}
			c.log.Debug("forwarded client: dial the thread's relay", "relay", addr, "err", err)
		}
		select {
		case <-c.stop:
			return
		case <-time.After(relayRetry):
		}
	}
}

// refused ends the client when the relay refused its upstream for good
// (Refused); it reports whether it did. Anything else — a relay shutting
// down (503), not relaying the thread (any longer), out of sandboxes — is
// tried again.
func (c *Client) refused(err error) bool {
	r, ok := Refused(err)
	if !ok {
		return false
	}
	if !r.Credential { // a refused credential is told by the close alone, as this bridge would
		c.answer(wire.ErrorEnvelope(c.thread, c.helloID, r.Code, "%s", r.Message))
	}
	c.kick(r.Close, r.Text, !r.Credential)
	c.log.Info("forwarded client refused by the thread's relay", "err", err)
	return true
}

// Refusal is how a client is ended whose upstream a relay refused for
// good (Refused): an error of Code and Message answering its hello, and a
// close frame of Close and Text. Credential says the relay refused the
// client's credential rather than its hello.
type Refusal struct {
	Code       wire.Code
	Message    string
	Close      int
	Text       string
	Credential bool
}

// Refused reports whether err, from Dial, is a relay's refusal that stays
// the same when asked again — of the credential (401, 403: unauthorized,
// and close 1008) or of the hello (finalRefusal: the relay's own code and
// message, and a normal close) — and how to end the client. A relay that
// cannot be reached, is shutting down (503) or does not relay the thread
// is not: the caller tries again or answers sandbox_unavailable.
func Refused(err error) (Refusal, bool) {
	var re *wsrelay.RefusedError
	var werr wire.Error
	switch {
	case errors.As(err, &re) && (re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden):
		return Refusal{Code: wire.CodeUnauthorized, Message: "credentials refused by the thread's relay",
			Close: websocket.ClosePolicyViolation, Text: "credentials refused by the thread's relay", Credential: true}, true
	case errors.As(err, &werr) && finalRefusal(werr.Code):
		return Refusal{Code: werr.Code, Message: werr.Message, Close: websocket.CloseNormalClosure}, true
	}
	return Refusal{}, false
}

// finalRefusal reports whether a relay's answer with code to a hello
// stays the same when asked again: the thread is not found (deleted, or
// not the client's), not allowed, or the hello is not understood.
func finalRefusal(code wire.Code) bool {
	switch code {
	case wire.CodeNotFound, wire.CodeNotAllowed, wire.CodeUnauthorized, wire.CodeVersionMismatch, wire.CodeBadMessage:
		return true
	}
	return false
}

// Dial opens an upstream to the relay at addr: the client's hello with
// the log's end as after_seq (the client's events come from the store),
// answered with the relay's hello. A refusal is a wire.Error.
func (c *Client) Dial(ctx context.Context, addr string) (*websocket.Conn, error) {
	h := c.hello
	if last, err := c.h.cfg.Store.LastSeq(c.thread); err == nil {
		h.AfterSeq = last
	}
	up, err := wsrelay.Dial(ctx, addr, c.auth, wire.MustNew(wire.TypeHello, c.thread, c.helloID, h))
	if err != nil {
		return nil, err
	}
	_ = up.SetReadDeadline(time.Now().Add(c.lim.HelloTimeout))
	_, data, err := up.ReadMessage()
	var env wire.Envelope
	if err == nil {
		err = json.Unmarshal(data, &env)
	}
	switch {
	case err != nil:
	case env.Type == wire.TypeHello:
		return up, nil
	case env.Type == wire.TypeError:
		var werr wire.Error
		_ = env.Decode(&werr)
		err = werr
	default:
		err = fmt.Errorf("the relay answered the hello with %s", env.Type)
	}
	up.Close()
	return nil, fmt.Errorf("hello to %s: %w", addr, err)
}

// carry reads the upstream until it ends, passing on to the client every
// message that is not an event; again reports whether the client should
// go on with another upstream, else the client is closed with code and
// text (the thread closed, credentials revoked, a frame refused).
func (c *Client) carry(up *websocket.Conn) (code int, text string, again bool) {
	c.setUpstream(up)
	defer c.clearUpstream(up)
	stop := context.AfterFunc(c.ctx, func() { up.Close() })
	defer stop()
	alive := func() { _ = up.SetReadDeadline(time.Now().Add(c.lim.PongWait)) } // the relay pings every pingPeriod
	alive()
	up.SetPingHandler(func(data string) error {
		alive()
		return up.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.lim.WriteWait))
	})
	for {
		typ, data, err := up.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && passedOn(ce.Code) {
				return ce.Code, ce.Text, false
			}
			c.log.Debug("forwarded client's upstream ended", "err", err)
			return 0, "", true
		}
		alive()
		if typ == websocket.TextMessage && c.fromStore(data) {
			continue
		}
		c.pass(frame{typ: typ, data: data})
	}
}

// passedOn reports whether an upstream's close with code ends the client's
// connection too: the thread closed (1000), credentials revoked (1008), a
// frame the relay refused. A relay going away (1001, or no close at all),
// too slow (1013) or failing (1011) is replaced by the next.
func passedOn(code int) bool {
	switch code {
	case websocket.CloseNormalClosure, websocket.ClosePolicyViolation, websocket.CloseMessageTooBig,
		websocket.CloseUnsupportedData, websocket.CloseInvalidFramePayloadData:
		return true
	}
	return false
}

// fromStore reports whether an upstream's text message is one the client
// gets from the store instead: an event (it has a seq), or the seq_ahead
// answer to the upstream's own hello.
func (c *Client) fromStore(data []byte) bool {
	var env wire.Envelope
	if json.Unmarshal(data, &env) != nil {
		return false
	}
	if env.Seq > 0 {
		return true
	}
	var werr wire.Error
	return env.Type == wire.TypeError && env.ID == c.helloID && env.Decode(&werr) == nil && werr.Code == wire.CodeSeqAhead
}
