package shell

// SetTestHook makes the waiter and the reader of every Process call h at
// fixed points ("exited", "woke", "armed"); nil removes it. Tests that set
// it must not run in parallel.
func SetTestHook(h func(event string)) {
	if h == nil {
		testHook.Store(nil)
		return
	}
	testHook.Store(&h)
}

// DrainMax is how long output is read after the main process exited when
// the terminal stays open and keeps producing.
const DrainMax = drainMax
