// Package records is the fleet's view of the stored threads: the record
// the bridge keeps of each thread ([Thread]), the [Store] that keeps them
// (the server's store), and a [Book] of the questions and updates the
// fleet's lifecycle asks of it — which threads a box holds, marking a
// thread suspended, the newest suspended thread of an assistant, the
// threads past their retention, and a box's new image or egress rules
// written to all of its threads.
//
// A Book holds no state beside its Store; it runs on its caller's
// goroutine and is as safe for concurrent use as its Store. It never
// knows whether a thread is live: the fleet asks its own books for that.
package records
