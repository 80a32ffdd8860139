package runtime

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"sperli/record"
	"sperli/wire"
)

// The counters of a rank process, for `sperli run --stats` (what mpiP and
// IPM add to MPI): time waiting in receives, collectives and checkpoints,
// messages and bytes sent and received, collectives made. They are
// counted always, with a few atomic additions beside the waits of
// runtime/waiting.go, and reported in the status record (record.RankStats) when
// a launcher started the rank. The launcher flags as the slowest rank
// the one that waited least in collectives: the others waited for it;
// and, from each kind's calls and waits (RankStats.Coll), the slowest rank
// of each kind of collective.

// procStart is when the process started, near enough: the package's init.
var procStart = time.Now()

var counters struct {
	recvWait, collWait, ckptWait atomic.Int64 // nanoseconds
	sentMsgs, sentBytes          atomic.Int64
	recvMsgs, recvBytes          atomic.Int64
	colls                        atomic.Int64
	peakLinks, peakFDs           atomic.Int64
	joinWall, joinCPU            atomic.Int64 // nanoseconds, at the join's end
	// perKind counts each collective kind's calls, waits and frames,
	// indexed by wire.CollKind (checkpoints aside: they are in ckptWait).
	perKind [wire.CollSplit + 1]struct {
		calls, wait                              atomic.Int64
		sentMsgs, sentBytes, recvMsgs, recvBytes atomic.Int64
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// stats returns this process's counters.
func stats() record.RankStats {
	s := record.RankStats{
		WallMS:      time.Since(procStart).Milliseconds(),
		RecvWaitMS:  ms(counters.recvWait.Load()),
		CollWaitMS:  ms(counters.collWait.Load()),
		CkptWaitMS:  ms(counters.ckptWait.Load()),
		SentMsgs:    counters.sentMsgs.Load(),
		SentBytes:   counters.sentBytes.Load(),
		RecvMsgs:    counters.recvMsgs.Load(),
		RecvBytes:   counters.recvBytes.Load(),
		Collectives: counters.colls.Load(),
		PeakLinks:   counters.peakLinks.Load(),
		PeakFDs:     counters.peakFDs.Load(),
	}
	for k := range counters.perKind {
		pk := &counters.perKind[k]
		if n := pk.calls.Load(); n > 0 {
			if s.Coll == nil {
				s.Coll = map[string]record.CollStats{}
			}
			s.Coll[wire.CollKind(k).String()] = record.CollStats{Calls: n, WaitMS: ms(pk.wait.Load()),
				SentMsgs: pk.sentMsgs.Load(), SentBytes: pk.sentBytes.Load(), RecvMsgs: pk.recvMsgs.Load(), RecvBytes: pk.recvBytes.Load()}
		}
	}
	s.PeakRSSKB = peakRSSKB()
	s.CPUMS = ms(cpuNS())
	s.JoinMS, s.JoinCPUMS = ms(counters.joinWall.Load()), ms(counters.joinCPU.Load())
	return s
}

// cpuNS is the processor time this process took so far, user and
// system, in nanoseconds (0 where the system does not say).
func cpuNS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// countJoined notes the wall and processor time of the process when its
// join ended (the first join: a process joins once).
func countJoined() {
	if counters.joinWall.Load() == 0 {
		counters.joinCPU.Store(cpuNS())
		counters.joinWall.Store(int64(time.Since(procStart)))
	}
}

// peakRSSKB is the peak resident size of this process's own memory, in
// KiB: VmHWM of /proc/self/status where there is one. getrusage's
// ru_maxrss is not that: a process that a Go program starts shares its
// parent's memory until its exec (clone with CLONE_VM), and Linux keeps
// that memory's peak as the new process's maxrss. Every rank so reported
// the launcher's size at the rank's start: 44 MiB at the 1,024th rank of
// a job, 14 at the first, where each rank's own peak was 12-13 MiB.
func peakRSSKB() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range bytes.Lines(b) {
			if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
				v = bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))
				if kb, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
					return kb
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return ru.Maxrss
	}
	return 0
}

// countSend counts a message handed to send.
func countSend(n int) {
	if !counting {
		return
	}
	counters.sentMsgs.Add(1)
	counters.sentBytes.Add(int64(n))
}

// countCollFrame counts a frame of n bytes of data that a collective of
// kind k sent (or took): in the totals and in its kind's (checkpoints
// aside).
func countCollFrame(k wire.CollKind, sent bool, n int) {
	if !counting || k >= wire.CollCkptBegin || int(k) >= len(counters.perKind) {
		return
	}
	pk := &counters.perKind[k]
	if sent {
		counters.sentMsgs.Add(1)
		counters.sentBytes.Add(int64(n))
		pk.sentMsgs.Add(1)
		pk.sentBytes.Add(int64(n))
		return
	}
	counters.recvMsgs.Add(1)
	counters.recvBytes.Add(int64(n))
	pk.recvMsgs.Add(1)
	pk.recvBytes.Add(int64(n))
}

// countColl counts a collective call (checkpoints aside).
func countColl(k wire.CollKind) {
	if !counting {
		return
	}
	if k < wire.CollCkptBegin {
		counters.colls.Add(1)
		if int(k) < len(counters.perKind) {
			counters.perKind[k].calls.Add(1)
		}
	}
}

// countRecv counts a matched receive (its done closed).
func countRecv(r *recvOp) {
	if !counting {
		return
	}
	if r.err == nil {
		counters.recvMsgs.Add(1)
		counters.recvBytes.Add(int64(len(r.data)))
	}
}

// countWait adds a finished wait to the counters.
func countWait(w *waitInfo) {
	if !counting {
		return
	}
	d := time.Since(w.since)
	switch what := w.what.(type) {
	case recvWait:
		counters.recvWait.Add(int64(d))
		select {
		case <-what.r.done:
			countRecv(what.r)
		default:
		}
	case collWait:
		k := what.call.Kind
		if k >= wire.CollCkptBegin {
			counters.ckptWait.Add(int64(d))
			return
		}
		counters.collWait.Add(int64(d))
		if int(k) < len(counters.perKind) {
			counters.perKind[k].wait.Add(int64(d))
		}
	}
}

// countLinks records that the slot has n links now, and the process
// openFDs descriptors (-1: unknown).
func countLinks(n int, openFDs int) {
	raise(&counters.peakLinks, int64(n))
	raise(&counters.peakFDs, int64(openFDs))
}

// raise sets a to v if v is more.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}
