package main

import (
	"os"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
)

// memFloor is the soft memory limit of a rank process whose live heap is
// small. With GOGC=400 a heap may grow to five times what is live before
// a collection; a peer filling this rank's receive window (64 MiB, SPEC
// §6) would then take it past 300 MB. The limit keeps such a rank near
// this floor; a program that really holds more gets twice its live heap
// (the default GOGC's growth), so the limit never makes the collector run
// without pause.
const memFloor = 160 << 20

// limitMemory sets the soft memory limit of a rank process unless
// GOMEMLIMIT is set, and keeps it at max(memFloor, 2 × live heap) after
// every collection. The hook runs only when a collection ran: an idle or
// spinning rank has no clock for it.
func limitMemory() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(memFloor)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var rearm func(*gcTick)
	rearm = func(t *gcTick) {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			limit := int64(memFloor)
			if live := int64(sample[0].Value.Uint64()); 2*live > limit {
				limit = 2 * live
			}
			debug.SetMemoryLimit(limit)
		}
		goruntime.SetFinalizer(t, rearm)
	}
	goruntime.SetFinalizer(&gcTick{}, rearm)
}

// gcTick is an object nothing refers to: its finalizer runs after each
// collection and sets it again.
type gcTick struct{ _ [32]byte }
