package fleet

// Handing a thread to another bridge on a shared store (issue 22,
// docs/store.md "Fail-over"): a bridge that lost a thread's lease lets
// go of its box without removing anything, and the bridge that took the
// lease adopts the running sandbox.

// LetGo takes thread id out of b without removing anything of it: when b
// was the thread's alone (thread scope), b leaves the fleet and its
// proxies stop, while its sandbox, workspace volume and folders stay for
// the bridge that relays the thread now (its proxies listen on the same
// sockets: closing ours does not remove them, boxdir.Dirs.Listen). A
// shared box stays with its other threads. Letting go twice is not an
// error.
func (f *Fleet) LetGo(b *Box, id string) error {
	if !f.Release(b, id) {
		return nil
	}
	<-b.ready // a member attached only once it was made
	f.pool.wakePool()
	return b.res.closeProxies()
}
