package main

import (
	goruntime "runtime"
	"runtime/debug"
	"testing"
)

// TestLimitMemory: the soft limit starts at the floor and follows a live
// heap that outgrows it (twice the live heap), so a large program is never
// held to the floor.
func TestLimitMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	limitMemory()
	if got := debug.SetMemoryLimit(-1); got != memFloor {
		t.Fatalf("limit after limitMemory = %d, want %d", got, memFloor)
	}
	live := make([][]byte, 0, 200)
	for i := 0; i < 200; i++ {
		live = append(live, make([]byte, 1<<20))
	}
	var got int64
	for i := 0; i < 50 && got < 2*200<<20; i++ {
		goruntime.GC()
		goruntime.Gosched() // the finalizer goroutine sets the limit
		got = debug.SetMemoryLimit(-1)
	}
	goruntime.KeepAlive(live)
	if got < 2*200<<20 {
		t.Fatalf("limit with 200 MiB live = %d, want at least %d", got, 2*200<<20)
	}
}
