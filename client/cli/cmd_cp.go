package cli

import "context"

// runCopy is "client cp": Copy, ended early by Ctrl-C.
func runCopy(ctx context.Context, inv *invocation, args []string) int {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with cctx, at the latest when runCopy returns
		select {
		case <-inv.p.Interrupts:
			cancel()
		case <-cctx.Done():
		}
	}()
	return Copy(cctx, inv.opts, args, inv.progress)
}
