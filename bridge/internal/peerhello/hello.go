// Package peerhello reads the first message of a WebSocket peer of the wire
// protocol, which must be its hello (docs/protocol.md): the bridge reads a
// client's this way (bridge/server ws.go), and an agent's answer has the
// same shape (bridge/fleet/greet reads it).
package peerhello

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Read reads conn's next message within timeout and returns it as a hello,
// with its envelope. The error is a wire.Error when the peer broke the
// protocol (too large, not a hello, a hello that does not decode, another
// protocol version) or answered with an error, another error when reading
// failed. It clears the read deadline before it returns.
func Read(conn *websocket.Conn, timeout time.Duration) (wire.Hello, wire.Envelope, error) {
	var hello wire.Hello
	if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return hello, wire.Envelope{}, err
	}
	defer conn.SetReadDeadline(time.Time{})
	_, r, err := conn.NextReader()
	if err != nil {
		return hello, wire.Envelope{}, fmt.Errorf("read hello: %w", err)
	}
	env, err := wire.ReadMessage(r, wire.MaxMessageBytes)
	switch {
	case errors.Is(err, wire.ErrTooLarge):
		return hello, env, wire.Error{Code: wire.CodeTooLarge, Message: "hello over the size limit"}
	case err != nil:
		return hello, env, err
	case env.Type == wire.TypeError:
		var werr wire.Error
		if err := env.Decode(&werr); err != nil {
			return hello, env, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
		}
		return hello, env, werr
	case env.Type != wire.TypeHello:
		return hello, env, wire.Error{Code: wire.CodeBadMessage, Message: fmt.Sprintf("first message must be hello, not %q", env.Type)}
	}
	if err := env.Decode(&hello); err != nil {
		return hello, env, wire.Error{Code: wire.CodeBadMessage, Message: err.Error()}
	}
	if hello.Version != wire.Version {
		return hello, env, wire.Error{Code: wire.CodeVersionMismatch,
			Message: fmt.Sprintf("this side speaks protocol version %d, not %d", wire.Version, hello.Version)}
	}
	return hello, env, nil
}
