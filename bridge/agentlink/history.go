package agentlink

import (
	"fmt"
	"log/slog"

	"github.com/gorilla/websocket"

	"github.com/boxwire/boxwire/bridge/wire"
)

// maxHistoryFrame bounds one history frame, under wire.MaxMessageBytes
// with room for the envelope.
const maxHistoryFrame = wire.MaxMessageBytes - 64<<10

// historyTypes are the logged events a new agent rebuilds its conversation
// from (agent/loop.FromEvents).
var historyTypes = map[wire.Type]bool{
	wire.TypeUserEcho: true, wire.TypeAssistantMessage: true, wire.TypeToolCall: true,
	wire.TypeToolResult: true, wire.TypeTurnDone: true,
}

// SendHistory writes thread id's conversation events from st to a newly
// greeted agent on ws, in frames under maxHistoryFrame, before anything
// else is sent to it. It returns how many events it sent. It blocks while
// it reads the store and writes.
func SendHistory(ws *websocket.Conn, st Store, id string, log *slog.Logger) (int, error) {
	st.Flush()
	var all []wire.Envelope
	for after := uint64(0); ; {
		evs, err := st.Events(id, after, 4096)
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
		for _, e := range evs {
			if historyTypes[e.Type] {
				all = append(all, e)
			}
		}
	}
	if len(all) == 0 {
		return 0, nil
	}
	var chunk []wire.Envelope
	size, sent := 0, 0
	flush := func(more bool) error {
		env := wire.MustNew(wire.TypeHistory, id, "", wire.History{Events: chunk, More: more})
		sent += len(chunk)
		chunk, size = nil, 0
		return writeEnvelope(ws, env)
	}
	for _, e := range all {
		n := len(e.Data) + len(e.ID) + 64
		if n > maxHistoryFrame {
			log.Warn("history event too large to hand over; skipped", "seq", e.Seq, "type", e.Type, "bytes", n)
			continue
		}
		if size+n > maxHistoryFrame {
			if err := flush(true); err != nil {
				return sent, fmt.Errorf("send history: %w", err)
			}
		}
		chunk = append(chunk, e)
		size += n
	}
	if err := flush(false); err != nil {
		return sent, fmt.Errorf("send history: %w", err)
	}
	return sent, nil
}
