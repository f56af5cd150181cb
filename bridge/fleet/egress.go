package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/boxwire/boxwire/bridge/egress"
	"github.com/boxwire/boxwire/bridge/fleet/boxproxy"
	"github.com/boxwire/boxwire/bridge/wire"
)

// Per-thread egress rules (docs/egress-thread.md). A thread may ask for
// egress rules when it is created (wire.CreateThread.Egress); they add to
// the bridge's allowlist for its sandbox alone, and each must fall within
// Config.EgressThreadMax. The rules belong to the sandbox (Box.egress): in
// assistant scope the first thread fixes them and a later thread may ask
// for the same rules or none; SetEgress replaces them later. They are kept
// in the thread's record, so an adopted or replaced sandbox keeps them.

// ThreadEgress validates rules a thread asks for and returns them in
// canonical form (see boxproxy.ThreadRules): a rule that does not parse is
// a bad_message, one outside the bridge's thread cap (or any, when the
// bridge has none) is not_allowed.
func (f *Fleet) ThreadEgress(asked []string) ([]string, error) {
	return boxproxy.ThreadRules(asked, f.cfg.EgressThreadMax)
}

// boxRules keeps the boxes' own egress rules (Box.egress, under the
// fleet's lock): a shared box's join check, a pooled box's rules at
// claim, the rules the egress proxy matches, and an adopted box's rules.
type boxRules struct{ f *Fleet }

// join checks that a thread asking for want may join b, a shared
// sandbox that exists already: it must ask for b's rules or none.
func (br boxRules) join(b *Box, want []string) error {
	f := br.f
	f.mu.Lock()
	have := b.egress
	f.mu.Unlock()
	if len(want) == 0 || slices.Equal(want, have) {
		return nil
	}
	return wire.Error{Code: wire.CodeNotAllowed, Message: fmt.Sprintf(
		"egress: the sandbox of assistant %q has egress rules [%s], fixed by its first thread; a thread may join it asking for those or none, not [%s]",
		b.assistant, strings.Join(have, " "), strings.Join(want, " "))}
}

// set gives b the thread rules (a pooled sandbox at claim).
func (br boxRules) set(b *Box, rules []string) {
	br.f.mu.Lock()
	defer br.f.mu.Unlock()
	b.egress = rules
}

// of returns the parsed thread rules of the sandbox whose box id is id
// (none when it has none or is gone).
func (br boxRules) of(id string) egress.Rules {
	f := br.f
	f.mu.Lock()
	var texts []string
	for _, b := range f.boxes {
		if b.id == id {
			texts = b.egress
			break
		}
	}
	f.mu.Unlock()
	rules, _ := egress.ParseRules(texts) // canonical texts of parsed rules
	return rules
}

// adopt gives an adopted sandbox the thread rules its stored
// threads name, dropping any the bridge's thread cap no longer covers, and
// sets them in recs, so the records registered again say what holds now.
func (br boxRules) adopt(b *Box, recs []ThreadRecord, log *slog.Logger) {
	var texts []string
	for _, r := range recs {
		if len(r.Egress) > 0 {
			texts = r.Egress
			break
		}
	}
	now := boxproxy.AdoptedRules(texts, br.f.cfg.EgressThreadMax, log)
	br.set(b, now)
	for i := range recs {
		recs[i].Egress = now
	}
}

// SetEgress gives box id, when it is live, the canonical rules (nil:
// none) and stores them in the records of every thread of that box, under
// the box's lock. It returns the rules the box had (the live box's, else
// prev, the caller's record's) and the threads of the box, live or stored,
// sorted.
func (f *Fleet) SetEgress(ctx context.Context, boxID string, rules, prev []string) (had, ids []string, err error) {
	unlockBox := f.life.Box(boxID)
	defer unlockBox()
	f.mu.Lock()
	for _, b := range f.boxes {
		if b.id == boxID && !b.gone {
			prev, b.egress = b.egress, rules
			for tid := range b.members {
				ids = append(ids, tid)
			}
		}
	}
	f.mu.Unlock()
	ids, err = f.book.SetEgress(ctx, boxID, rules, ids)
	if err != nil {
		return nil, nil, err
	}
	return slices.Clone(prev), ids, nil
}
