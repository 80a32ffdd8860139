package runtime

import (
	"testing"
	"time"

	"sperli/codes"
)

// TestLogLimit: one line per key a second; the first line after a quiet
// second tells how many were held back; keys do not share a limit.
func TestLogLimit(t *testing.T) {
	l := make(logLimit)
	t0 := time.Unix(1000, 0)
	a, b := logKey{-1, codes.CertRefused}, logKey{1, codes.TokenRank}
	steps := []struct {
		k        logKey
		at       time.Duration
		ok       bool
		heldBack int
	}{
		{a, 0, true, 0},
		{a, 10 * time.Millisecond, false, 0},
		{a, 999 * time.Millisecond, false, 0},
		{b, 999 * time.Millisecond, true, 0},
		{a, time.Second, true, 2},
		{a, 1500 * time.Millisecond, false, 0},
		{b, 1500 * time.Millisecond, false, 0},
		{a, 5 * time.Second, true, 1},
		{b, 5 * time.Second, true, 1},
		{a, 7 * time.Second, true, 0},
	}
	for i, s := range steps {
		ok, held := l.allow(s.k, t0.Add(s.at))
		if ok != s.ok || held != s.heldBack {
			t.Errorf("step %d: allow(%v, +%v) = %v, %d; want %v, %d", i, s.k, s.at, ok, held, s.ok, s.heldBack)
		}
	}
}
