// Package threadlog is a thread's event log as the bridge keeps it in
// memory: the thread's numbering (seq), the tail of the newest committed
// events that live clients and short resumes read without touching the
// store, the cap on the tool output the store keeps of one call, and
// whether the agent is working as those events show. It does no I/O and
// starts no goroutines; a [Log] is guarded by its owner's lock.
package threadlog
