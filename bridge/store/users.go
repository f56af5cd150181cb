package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/boxwire/boxwire/bridge/auth"
)

// Users, their API keys (by key id) and the audit log (by a sequence
// number, oldest first) live in buckets of their own; the store implements
// auth.Store. They are written at once, not through the events' writer:
// they are few and each must be durable when its call returns.
var (
	bucketUsers = []byte("users")
	bucketKeys  = []byte("keys")
	bucketAudit = []byte("audit")
)

var _ auth.Store = (*Accounts)(nil)

// Accounts are the store's users, keys and audit log: its auth.Store
// (Store.Accounts). They share the store's database file and end with its Close.
type Accounts struct {
	db *bolt.DB
}

// Accounts returns the store's users, keys and audit log.
func (s *Store) Accounts() auth.Store { return s.accounts }

// PutUser writes u.
func (a *Accounts) PutUser(_ context.Context, u auth.User) error {
	return a.putRecord(bucketUsers, u.Name, u)
}

// User returns the user name, or an error wrapping auth.ErrNotFound.
func (a *Accounts) User(_ context.Context, name string) (u auth.User, err error) {
	return u, a.getRecord(bucketUsers, name, &u)
}

// Users lists every user, by name.
func (a *Accounts) Users(_ context.Context) ([]auth.User, error) {
	return listRecords[auth.User](a, bucketUsers, func(auth.User) bool { return true })
}

// DeleteUser removes the user name and every key of theirs, in one
// transaction.
func (a *Accounts) DeleteUser(_ context.Context, name string) error {
	return a.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketUsers).Delete([]byte(name)); err != nil {
			return err
		}
		keys := tx.Bucket(bucketKeys)
		var drop [][]byte
		err := keys.ForEach(func(k, v []byte) error {
			var key auth.Key
			if err := json.Unmarshal(v, &key); err == nil && key.User == name {
				drop = append(drop, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range drop {
			if err == nil {
				err = keys.Delete(k)
			}
		}
		return err
	})
}

// PutKey writes k.
func (a *Accounts) PutKey(_ context.Context, k auth.Key) error {
	return a.putRecord(bucketKeys, k.ID, k)
}

// Key returns the key id, or an error wrapping auth.ErrNotFound.
func (a *Accounts) Key(_ context.Context, id string) (k auth.Key, err error) {
	return k, a.getRecord(bucketKeys, id, &k)
}

// Keys lists the keys of user, or every key when user is "".
func (a *Accounts) Keys(_ context.Context, user string) ([]auth.Key, error) {
	return listRecords[auth.Key](a, bucketKeys, func(k auth.Key) bool { return user == "" || k.User == user })
}

// AppendAudit appends e to the audit log.
func (a *Accounts) AppendAudit(_ context.Context, e auth.AuditEntry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	return a.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], n)
		return b.Put(k[:], data)
	})
}

// Audit returns the entries that match f, oldest first (the newest
// f.Limit when set).
func (a *Accounts) Audit(_ context.Context, f auth.AuditFilter) ([]auth.AuditEntry, error) {
	out, err := listRecords[auth.AuditEntry](a, bucketAudit, f.Match)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out, err
}

func (a *Accounts) putRecord(bucket []byte, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record: %w", bucket, err)
	}
	return a.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(key), data) })
}

func (a *Accounts) getRecord(bucket []byte, key string, v any) error {
	return a.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucket).Get([]byte(key))
		if data == nil {
			return fmt.Errorf("%s %q: %w", bucket, key, auth.ErrNotFound)
		}
		return json.Unmarshal(data, v)
	})
}

func listRecords[T any](a *Accounts, bucket []byte, keep func(T) bool) ([]T, error) {
	var out []T
	err := a.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			var rec T
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decode %s record: %w", bucket, err)
			}
			if keep(rec) {
				out = append(out, rec)
			}
			return nil
		})
	})
	return out, err
}
