// Command pause is the test cluster's pod sandbox image (e2e/kube/cluster/up.sh): it
// holds the pod's namespaces and waits for SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}
