// Package store is the bridge's embedded, persistent store: thread records
// and every event of every thread, append-only and numbered by seq, in one
// bbolt file (<data-dir>/boxwire.db).
//
// A Store is safe for concurrent use. Appends go through one writer
// goroutine that commits whatever is queued in a single transaction (group
// commit) and then calls each append's callback in order, so a caller can
// deliver an event only once it is on disk. Open starts the writer; Close
// drains it and closes the file.
package store
