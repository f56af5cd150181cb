package users

import (
	"testing"
	"time"
)

// TestTokenDaysResetAtMidnightUTC: a user's count grows within a UTC day
// and starts again at zero on the next.
func TestTokenDaysResetAtMidnightUTC(t *testing.T) {
	var d tokenDays
	day := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)
	if got := d.add("a", 5, day); got != 5 {
		t.Fatalf("first add: %d", got)
	}
	if got := d.add("a", 7, day.Add(30*time.Second)); got != 12 {
		t.Fatalf("same day: %d", got)
	}
	if got := d.add("b", 1, day); got != 1 {
		t.Fatalf("another user: %d", got)
	}
	if got := d.add("a", 0, day.Add(2*time.Minute)); got != 0 {
		t.Fatalf("next day: %d", got)
	}
}
