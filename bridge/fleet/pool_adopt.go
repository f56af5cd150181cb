package fleet

import (
	"context"
	"errors"

	"github.com/boxwire/boxwire/bridge/wire"
)

// errPoolUnclaimed is why Reconcile removes a pooled sandbox of an earlier
// run that no thread took: it holds nothing of anyone.
var errPoolUnclaimed = errors.New("pooled sandbox no thread took")

// adopt prepares b, a pooled sandbox an earlier run left, for
// adoption: it is adopted only when the store has a thread for its box
// (the thread took it). b then takes that thread's box key and the
// thread's own idle TTL, which the sandbox's labels, written before the
// claim, cannot say. It blocks for one store read.
func (h poolHost) adopt(ctx context.Context, b *Box) error {
	f := h.f
	r, ok, err := f.book.Taken(ctx, b.id)
	if err != nil {
		return err
	}
	if !ok {
		return errPoolUnclaimed
	}
	b.thread = r.ID
	b.key = boxKey(wire.ScopeThread, r.ID)
	if r.IdleTTL > 0 {
		b.idleTTL = r.IdleTTL
	}
	return nil
}
