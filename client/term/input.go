package term

import (
	"io"
	"sync"
)

// Input shares one reader (stdin) between the chat's line reader and a
// shell: Read is the chat's view; while a shell has borrowed it (Borrow),
// Read waits and every byte goes to the shell. Safe for concurrent use.
//
// Its one goroutine reads the source and ends at the source's EOF or
// error; nothing waits for it, because a read from a terminal cannot be
// cancelled (the process exit ends it).
type Input struct {
	src  io.Reader
	once sync.Once
	data chan []byte // from the pump; closed at the source's end

	mu      sync.Mutex
	rest    []byte        // read from the source, not yet consumed
	lent    chan struct{} // closed when the current borrow ends; nil if none
	lending chan struct{} // closed when a borrow starts
	err     error         // the source's end, once data is closed
}

// NewInput returns an Input over src. It reads nothing until first used.
func NewInput(src io.Reader) *Input {
	return &Input{src: src, data: make(chan []byte), lending: make(chan struct{})}
}

func (in *Input) start() {
	in.once.Do(func() {
		go func() {
			defer close(in.data)
			for {
				buf := make([]byte, 4096)
				n, err := in.src.Read(buf)
				if n > 0 {
					in.data <- buf[:n]
				}
				if err != nil {
					in.mu.Lock()
					in.err = err
					in.mu.Unlock()
					return
				}
			}
		}()
	})
}

// Read reads like the source, waiting while the input is borrowed.
func (in *Input) Read(p []byte) (int, error) {
	in.start()
	for {
		in.mu.Lock()
		if lent := in.lent; lent != nil {
			in.mu.Unlock()
			<-lent
			continue
		}
		if n, ok := in.takeLocked(p); ok {
			in.mu.Unlock()
			return n, nil
		}
		lending := in.lending
		in.mu.Unlock()
		select {
		case b, ok := <-in.data:
			if !ok {
				if err := in.endErr(); err != nil {
					return 0, err
				}
				continue // bytes left in rest
			}
			in.mu.Lock()
			in.rest = append(in.rest, b...) // for whoever reads next
			in.mu.Unlock()
		case <-lending:
		}
	}
}

// Borrow hands every byte to the returned reader until giveBack is called;
// its Read then returns io.EOF. Borrows do not nest: a second Borrow waits
// for the first to be given back.
func (in *Input) Borrow() (r io.Reader, giveBack func()) {
	in.start()
	in.mu.Lock()
	for in.lent != nil {
		lent := in.lent
		in.mu.Unlock()
		<-lent
		in.mu.Lock()
	}
	lent := make(chan struct{})
	in.lent = lent
	close(in.lending)
	in.lending = make(chan struct{})
	in.mu.Unlock()
	var once sync.Once
	return borrowed{in: in, lent: lent}, func() {
		once.Do(func() {
			in.mu.Lock()
			in.lent = nil
			in.mu.Unlock()
			close(lent)
		})
	}
}

type borrowed struct {
	in   *Input
	lent chan struct{}
}

func (b borrowed) Read(p []byte) (int, error) {
	in := b.in
	for {
		select {
		case <-b.lent:
			return 0, io.EOF
		default:
		}
		in.mu.Lock()
		n, ok := in.takeLocked(p)
		in.mu.Unlock()
		if ok {
			return n, nil
		}
		select {
		case d, ok := <-in.data:
			if !ok {
				return 0, io.EOF
			}
			in.mu.Lock()
			in.rest = append(in.rest, d...)
			in.mu.Unlock()
		case <-b.lent:
			return 0, io.EOF
		}
	}
}

// takeLocked copies buffered bytes into p; in.mu is held.
func (in *Input) takeLocked(p []byte) (int, bool) {
	if len(in.rest) == 0 {
		return 0, false
	}
	n := copy(p, in.rest)
	in.rest = in.rest[n:]
	return n, true
}

func (in *Input) endErr() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.rest) > 0 {
		return nil
	}
	return in.err
}
