// Command hopcopy is the floor the bench measures the bridge's relay hop
// against: a process that does nothing but copy bytes between a loopback
// TCP connection and a unix socket (one goroutine a direction, no
// parsing, no queues). `hopcopy SOCKET` listens on 127.0.0.1, prints the
// address it listens on as its first line, and for every connection it
// accepts dials SOCKET and copies both ways until either side ends.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: hopcopy SOCKET")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "hopcopy:", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hopcopy:", err)
			os.Exit(1)
		}
		go relay(c, os.Args[1])
	}
}

// relay copies between c and a new connection to the unix socket path
// until either side ends, then closes both.
func relay(c net.Conn, path string) {
	defer c.Close()
	u, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hopcopy:", err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}
