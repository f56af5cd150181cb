package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/internal/wsrelay"
	"github.com/boxwire/boxwire/bridge/wire"
)

// A forwarded client's upstream (forwarded.go): the connection to the
// thread's relay its requests go over, carried by the relay goroutine and
// dialled again, to whichever bridge relays the thread then, when it ends.

// awaitUpstream returns the upstream, waiting at most upstreamWait while
// there is none; nil when none came.
func (f *forwarded) awaitUpstream() *websocket.Conn {
	f.mu.Lock()
	up, ready := f.up, f.upReady
	f.mu.Unlock()
	if up != nil {
		return up
	}
	timer := time.NewTimer(upstreamWait)
	defer timer.Stop()
	select {
	case <-ready:
	case <-timer.C:
	case <-f.stop:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up
}

func (f *forwarded) setUpstream(up *websocket.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = up
	close(f.upReady)
}

func (f *forwarded) clearUpstream(up *websocket.Conn) {
	f.mu.Lock()
	if f.up == up {
		f.up, f.upReady = nil, make(chan struct{})
	}
	f.mu.Unlock()
	up.Close()
}

// relay carries the upstream up, and when it ends, finds the thread's
// relay again and dials it, until the client is kicked; a close the client
// must see (carry) is passed on, and so is a thread that is gone.
func (f *forwarded) relay(up *websocket.Conn) {
	for {
		if up != nil {
			code, text, again := f.carry(up)
			if !again {
				f.kick(code, text, true)
				return
			}
			up = nil
			if f.ctx.Err() != nil {
				return
			}
			f.log.Info("forwarded client: the thread's relay went away; finding the next")
			f.answer(wire.ErrorEnvelope(f.thread, "", wire.CodeSandboxUnavailable,
				"the bridge relaying thread %s went away: its terminals are closed (open them again); events go on, and requests wait for the bridge that relays it next", f.thread))
		}
		addr, err := f.s.relayAddress(f.ctx, f.thread)
		switch {
		case errors.Is(err, errThreadGone):
			f.answer(wire.ErrorEnvelope(f.thread, "", wire.CodeNotFound, "thread %s is gone", f.thread))
			f.kick(closeNormal, "thread closed", true)
			return
		case addr == "" && f.s.lookup(f.thread) != nil: // relayed here, and this bridge has no address to dial
			f.kick(closeGoingAway, closeMoved, true)
			return
		}
		if addr != "" {
			if up, err = f.dial(f.ctx, addr); err == nil {
				f.log.Info("forwarded client: requests go to the thread's relay again", "relay", addr)
				continue
			}
			if f.refused(err) {
				return
			}
			f.log.Debug("forwarded client: dial the thread's relay", "relay", addr, "err", err)
		}
		select {
		case <-f.stop:
			return
		case <-time.After(relayRetry):
		}
	}
}

// refused ends the client when the relay refused its upstream for good:
// the credential (401, 403) or the hello (finalRefusal); it reports
// whether it did. Anything else — a relay shutting down (503), not
// relaying the thread (any longer), out of sandboxes — is tried again.
func (f *forwarded) refused(err error) bool {
	var re *wsrelay.RefusedError
	var werr wire.Error
	switch {
	case errors.As(err, &re) && (re.Status == http.StatusUnauthorized || re.Status == http.StatusForbidden):
		f.kick(websocket.ClosePolicyViolation, "credentials refused by the thread's relay", false)
	case errors.As(err, &werr) && finalRefusal(werr.Code):
		f.answer(wire.ErrorEnvelope(f.thread, f.helloID, werr.Code, "%s", werr.Message))
		f.kick(closeNormal, "", true)
	default:
		return false
	}
	f.log.Info("forwarded client refused by the thread's relay", "err", err)
	return true
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

// dial opens an upstream to the relay at addr: the client's hello with
// the log's end as after_seq (the client's events come from the store),
// answered with the relay's hello. A refusal is a wire.Error.
func (f *forwarded) dial(ctx context.Context, addr string) (*websocket.Conn, error) {
	h := f.hello
	if last, err := f.s.db.LastSeq(f.thread); err == nil {
		h.AfterSeq = last
	}
	up, err := wsrelay.Dial(ctx, addr, f.auth, wire.MustNew(wire.TypeHello, f.thread, f.helloID, h))
	if err != nil {
		return nil, err
	}
	_ = up.SetReadDeadline(time.Now().Add(helloTimeout))
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
func (f *forwarded) carry(up *websocket.Conn) (code int, text string, again bool) {
	f.setUpstream(up)
	defer f.clearUpstream(up)
	stop := context.AfterFunc(f.ctx, func() { up.Close() })
	defer stop()
	alive := func() { _ = up.SetReadDeadline(time.Now().Add(pongWait)) } // the relay pings every pingPeriod
	alive()
	up.SetPingHandler(func(data string) error {
		alive()
		return up.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeWait))
	})
	for {
		typ, data, err := up.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) && passedOn(ce.Code) {
				return ce.Code, ce.Text, false
			}
			f.log.Debug("forwarded client's upstream ended", "err", err)
			return 0, "", true
		}
		alive()
		if typ == websocket.TextMessage && f.fromStore(data) {
			continue
		}
		f.pass(frame{typ: typ, data: data})
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
func (f *forwarded) fromStore(data []byte) bool {
	var env wire.Envelope
	if json.Unmarshal(data, &env) != nil {
		return false
	}
	if env.Seq > 0 {
		return true
	}
	var werr wire.Error
	return env.Type == wire.TypeError && env.ID == f.helloID && env.Decode(&werr) == nil && werr.Code == wire.CodeSeqAhead
}
