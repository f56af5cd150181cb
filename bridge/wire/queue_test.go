package wire_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boxwire/boxwire/bridge/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

func take(t *testing.T, q *wire.Queue[string]) wire.Item[string] {
	t.Helper()
	select {
	case it := <-q.Items():
		q.Release(it)
		return it
	case <-time.After(waitFor):
		t.Fatal("queue empty")
		return wire.Item[string]{}
	}
}

func TestQueueOrderAndBounds(t *testing.T) {
	t.Parallel()
	q := wire.NewQueue[string](4, 10)
	if !q.Offer([]byte("abcd")) || !q.Send("ctl") || !q.Offer([]byte("efgh")) {
		t.Fatal("refused within bounds")
	}
	if q.Offer([]byte("ijk")) {
		t.Fatal("took a frame past the byte budget")
	}
	if !q.Send("ctl2") {
		t.Fatal("a control message counts against the byte budget")
	}
	if q.Send("ctl3") || q.Offer(nil) {
		t.Fatal("took an item past the item bound")
	}
	if q.Bytes() != 8 || q.Len() != 4 {
		t.Fatalf("bytes %d len %d", q.Bytes(), q.Len())
	}
	want := []string{"abcd", "ctl", "efgh", "ctl2"}
	for _, w := range want {
		it := take(t, q)
		got := string(it.Frame)
		if it.Msg != nil {
			got = *it.Msg
		}
		if got != w {
			t.Fatalf("got %q, want %q", got, w)
		}
	}
	if q.Bytes() != 0 {
		t.Fatalf("%d bytes left after release", q.Bytes())
	}
	if _, ok := q.TryNext(); ok {
		t.Fatal("TryNext on an empty queue")
	}
}

func TestReleaseWakesWatchers(t *testing.T) {
	t.Parallel()
	q := wire.NewQueue[string](8, 4)
	if !q.Offer([]byte("abcd")) {
		t.Fatal("refused")
	}
	a, b := wire.NewWaker(), wire.NewWaker()
	q.Watch(a)
	q.Watch(b)
	q.Unwatch(b)
	it, ok := q.TryNext()
	if !ok {
		t.Fatal("empty")
	}
	q.Release(it)
	select {
	case <-a.C():
	default:
		t.Fatal("a watching Waker was not woken by Release")
	}
	select {
	case <-b.C():
		t.Fatal("an unwatched Waker was woken")
	default:
	}
	if !q.Offer([]byte("efgh")) {
		t.Fatal("no room after Release")
	}
}

func TestWakerKeepsOneSignal(t *testing.T) {
	t.Parallel()
	w := wire.NewWaker()
	w.Wake()
	w.Wake() // does not block
	<-w.C()
	select {
	case <-w.C():
		t.Fatal("two signals")
	default:
	}
}

// BenchmarkOfferRelease is the hot path of a terminal stream: one frame
// in, one frame out.
func BenchmarkOfferRelease(b *testing.B) {
	q := wire.NewQueue[string](512, 8<<20)
	frame := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		q.Offer(frame)
		it, _ := q.TryNext()
		q.Release(it)
	}
}
