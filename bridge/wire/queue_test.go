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

func take[M any](t *testing.T, q *wire.Queue[M]) wire.Item[M] {
	t.Helper()
	select {
	case <-q.Ready():
		it, ok := q.TryNext()
		if !ok {
			t.Fatal("ready with nothing queued")
		}
		q.Release(it)
		return it
	case <-time.After(waitFor):
		t.Fatal("queue empty")
		return wire.Item[M]{}
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

// The ring wraps around and grows past its first size without reordering,
// and Ready keeps a token while items wait, so a consumer taking one item
// per receive drains everything.
func TestQueueGrowsInOrder(t *testing.T) {
	t.Parallel()
	q := wire.NewQueue[int](100, 0)
	next, want := 0, 0
	for round := range 5 {
		for range 3 + round*20 { // wraps the small ring, then grows it
			if !q.Send(next) {
				t.Fatalf("refused item %d", next)
			}
			next++
		}
		for q.Len() > 0 {
			if got := *take(t, q).Msg; got != want {
				t.Fatalf("got %d, want %d", got, want)
			}
			want++
		}
	}
	select {
	case <-q.Ready():
		if _, ok := q.TryNext(); ok {
			t.Fatal("an item left after draining")
		}
	default:
	}
}
