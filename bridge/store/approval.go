package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/wire"
)

// Approval is an approval request the bridge holds an action for
// (docs/approvals.md): pending until Decision is set. It names every
// thread asked (a shared sandbox's egress asks all of its threads) and
// the bridge that waits for the answer, so any bridge can show it and
// take the answer; the first decision stored wins (DecideApproval).
//
// Holder is the bridge process that asked (lease.Book.Instance). Sandbox,
// for a tool call, is the sandbox whose agent asked: only that agent can
// still be waiting for the answer. After is, per thread asked, the seq of
// the thread's newest event when it was asked: its approval_request and
// approval_decision, once logged, come after it (bridge/approval reads
// the log from there before it publishes either again).
type Approval struct {
	ID       string                 `json:"id"`
	Threads  []string               `json:"threads"`
	Request  wire.ApprovalRequest   `json:"request"`
	Holder   string                 `json:"holder,omitempty"`
	Sandbox  string                 `json:"sandbox,omitempty"`
	After    map[string]uint64      `json:"after,omitempty"`
	Created  time.Time              `json:"created"`
	Decision *wire.ApprovalDecision `json:"decision,omitempty"`
}

// ErrNoApproval is the error of DecideApproval for an id the store does
// not have (never asked, or deleted).
var ErrNoApproval = errors.New("no such approval")

// ApprovalKeep is how long Prune keeps an approval that was never deleted
// (its bridge died while it waited): far past any approval timeout.
const ApprovalKeep = 24 * time.Hour

// bucketApprovals holds one JSON Approval per id.
var bucketApprovals = []byte("approvals")

// PutApproval creates or replaces a.
func (s *Store) PutApproval(_ context.Context, a Approval) error {
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketApprovals)
		if err != nil {
			return err
		}
		return b.Put([]byte(a.ID), data)
	})
}

// Approval returns the approval id; ok is false when there is none.
func (s *Store) Approval(_ context.Context, id string) (a Approval, ok bool, err error) {
	ok, err = s.getJSON(bucketApprovals, id, &a)
	if err != nil {
		return Approval{}, false, fmt.Errorf("read approval %s: %w", id, err)
	}
	return a, ok, nil
}

// Approvals returns the thread's undecided approvals, oldest first.
func (s *Store) Approvals(_ context.Context, thread string) ([]Approval, error) {
	var out []Approval
	err := s.db.View(func(tx *bolt.Tx) error {
		return forEachApproval(tx, func(_ []byte, a Approval) error {
			if a.Decision == nil && slices.Contains(a.Threads, thread) {
				out = append(out, a)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read approvals of %s: %w", thread, err)
	}
	sortApprovals(out)
	return out, nil
}

// DecideApproval stores d as the decision of approval id unless it has
// one: won reports whether d is now its decision, and a is the approval
// with whichever decision stands. An unknown id is ErrNoApproval.
func (s *Store) DecideApproval(_ context.Context, id string, d wire.ApprovalDecision) (a Approval, won bool, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		var data []byte
		if b != nil {
			data = b.Get([]byte(id))
		}
		if data == nil {
			return fmt.Errorf("decide approval %s: %w", id, ErrNoApproval)
		}
		if err := json.Unmarshal(data, &a); err != nil {
			return err
		}
		if a.Decision != nil {
			return nil
		}
		a.Decision, won = &d, true
		data, err := json.Marshal(a)
		if err != nil {
			return err
		}
		return b.Put([]byte(id), data)
	})
	return a, won, err
}

// DeleteApproval removes the approval id; a missing one is not an error.
func (s *Store) DeleteApproval(_ context.Context, id string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return deleteKeyTx(tx, bucketApprovals, id) })
}

// dropApprovalsTx removes the approvals that name any of threads, and,
// when before is not zero, those created before it.
func dropApprovalsTx(tx *bolt.Tx, threads []string, before time.Time) error {
	var drop [][]byte
	err := forEachApproval(tx, func(k []byte, a Approval) error {
		old := !before.IsZero() && a.Created.Before(before)
		if old || slices.ContainsFunc(a.Threads, func(t string) bool { return slices.Contains(threads, t) }) {
			drop = append(drop, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := tx.Bucket(bucketApprovals).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func forEachApproval(tx *bolt.Tx, f func(k []byte, a Approval) error) error {
	b := tx.Bucket(bucketApprovals)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, v []byte) error {
		var a Approval
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("decode approval %s: %w", k, err)
		}
		return f(k, a)
	})
}

// sortApprovals orders approvals oldest first (then by id).
func sortApprovals(as []Approval) {
	sort.Slice(as, func(i, j int) bool {
		if !as[i].Created.Equal(as[j].Created) {
			return as[i].Created.Before(as[j].Created)
		}
		return as[i].ID < as[j].ID
	})
}
