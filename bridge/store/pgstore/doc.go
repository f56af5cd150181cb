// Package pgstore is the bridge's store on PostgreSQL: a store.Backend
// with the bbolt store's semantics (bridge/store/storetest runs the same
// cases on both) that several bridges can share.
//
// Open connects (pgx pool), applies the schema migrations embedded from
// migrations/ (goose, under an advisory lock, so bridges starting together
// take turns) and starts the writer goroutine. Appends, cursors and lists
// of requests in flight are queued and committed by that one writer,
// everything queued in one transaction (group commit); each thread the
// batch touches has its thread_logs row locked FOR UPDATE, in thread
// order, before anything is written, so a seq the store chooses
// (AppendNext) is one past the newest committed, and writers in other
// bridges wait for the lock instead of taking the same seq or leaving a
// gap. Reads and the users, keys and audit calls go straight to the pool.
// Close drains the writer and closes the pool.
//
// A Store is safe for concurrent use.
package pgstore
