// Command libsperli_go is the Go half of libsperli, the C library of SPEC
// §12. It is built with
//
//	go build -buildmode=c-archive ./libsperli/go
//
// (scripts/libsperli/build.sh does it) and is never called by programs
// directly: its exported functions, all named sperligo_*, are called only by
// libsperli/src/sperli.c, which has already checked every argument, holds
// the one-call-at-a-time flag, and keeps the table of operation handles. So
// this layer needs no locks: at most one of its functions runs at a time.
//
// Promises this layer keeps, and checks:
//
//   - No Go panic crosses into C: every export recovers, and a panic or any
//     other broken promise of the library ends the process with abort(3)
//     after one line on standard error.
//   - A C buffer handed to sperli_send or sperli_sendrecv is read only
//     during the call: the message goes to the connection from the
//     caller's memory (no copy) and the call returns when it is written;
//     when the job ended during the call, the communicator is closed
//     before the call returns, so that no goroutine reads the buffer later. start_send and sends to this rank
//     itself copy (the runtime keeps those bytes after the call).
//   - Results (receives, sendrecv, collectives, resume) are Go memory kept
//     in the session until the next call that makes data; sperli_result
//     copies them out.
//   - Calls that wait (join, the receives, probe, sendrecv, finish_send and
//     finish_recv, the collectives and split, finish, checkpoint, resume)
//     run on the C thread when the
//     session's reads spin (runtime's low-latency wait: its goroutine then
//     spins in the read itself), else on one worker goroutine while the C
//     thread waits in C (wait.c): a C thread that calls into Go is locked to
//     its goroutine, and a locked goroutine that parks in Go's poller costs
//     every message two thread wake-ups instead of one. Sends, which write
//     to the connection directly, run on the C thread.
//   - The runtime's H1616 and H1617 become negative codes: H1617 (a peer
//     that has finished) is SPERLI_E_FINISHED; H1616 of a call cannot
//     happen after sperli.c's checks, so it is a broken promise — save the
//     H1616 of Init for an environment variable (SPERLI_SPIN_US), which no
//     argument check can see: init answers it as 1616.
//   - Every length from C is range-checked before it becomes a slice: a
//     length sperli.c lets through is within what the runtime takes (so
//     unsafe.Slice never sees a length over math.MaxInt).
//   - Communicators are numbered by sperli.c's table: index 0 is the
//     session's own (the job), every later one made by split, at the index
//     sperli.c gives it. A freed one never reaches this layer again, save
//     the operations it started, which are kept with their communicator.
package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "wait.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"sperli/codes"
	"sperli/job"
	"sperli/record"
	"sperli/runtime"
)

func main() {}

// The codes of sperli.h this layer makes: SPERLI_E_FINISHED (from the
// runtime's H1617), SPERLI_E_RECOVERED (a call of a generation abandoned
// for the next: the session is in the next one now) and SPERLI_NOT_NEEDED
// (init of a spare whose job finished without it).
const (
	eFinished  = -12
	eRecovered = -17
	notNeeded  = 1
)

// session is the open session: one per process.
type session struct {
	moving     bool            // in recover: a code there is no new recovery
	lossReturn bool            // set_on_loss(return) was made in this session
	c          *runtime.Comm   // the job's communicator: comms[0]
	comms      []*runtime.Comm // by sperli.c's index
	result     []byte          // the kept result of the last call that made data
	ops        []openOp        // open operations by slot index (sperli.c's table)
	queues     []*cqueue       // work queues by sperli.c's index (workq.go)
}

// openOp is an open operation and the communicator that started it.
type openOp struct {
	c  *runtime.Comm
	op any
}

// at is the communicator of sperli.c's index ci.
func (s *session) at(ci C.int) *runtime.Comm {
	i := int(ci)
	if i < 0 || i >= len(s.comms) {
		broken(fmt.Sprintf("communicator %d of %d reached the Go layer", i, len(s.comms)))
	}
	return s.comms[i]
}

var (
	sess     *session
	lastErr  error        // the error of the last positive (or Go-made negative) code
	lastCode C.int        // its code
	lastJob  *runtime.Job // the last description read, for sperli_exit without a session
	ended    error        // how the last session ended when that is an error (abort)
	watched  bool         // standard input is a launched session's control channel
	spared   bool         // the last init answered SPERLI_NOT_NEEDED
	ctx      = context.Background()
)

// The worker goroutine runs the calls that wait. Between calls it sleeps
// in a read of a pipe, so that a call wakes it through the netpoller: the
// thread woken takes a free P and runs the call at once. (A channel would
// put the worker on the run queue of the P the C thread keeps while it is
// back in C, where it waits until sysmon takes that P away: up to
// milliseconds.) Spinning here between calls, even 20 µs, made round trips
// slower on two cores: it takes the processor the peer needs. The C side
// holds the one-call-at-a-time flag until the call is done, so there is at
// most one call pending.
var (
	pending      atomic.Pointer[func()]
	sleeping     atomic.Bool // the worker sleeps in the pipe: a call must write to it
	wakeR, wakeW *os.File
	worker1      = os.Getenv("SPERLI_WORKER") // "0": every call on the C thread; "1": every waiting call on the worker
	direct       = worker1 == "0"
	// onCaller: the session's reads spin outside Go's poller (runtime's
	// low-latency wait), so a waiting call runs on the C thread itself: its
	// goroutine spins in the read and parks only after the spin, and the
	// worker's wake-up, the cost it exists to avoid, would be the only one
	// left (C–C round trip 134 µs with the worker, 36 µs without, Go–Go 35).
	onCaller atomic.Bool
)

// setSession makes s the open session (nil: none) and decides where its
// waiting calls run.
func setSession(s *session) {
	sess = s
	onCaller.Store(s != nil && s.c.Spin() > 0 && worker1 != "1")
}

func init() {
	if direct {
		return
	}
	var err error
	if wakeR, wakeW, err = os.Pipe(); err != nil {
		panic("libsperli: no pipe for the worker: " + err.Error()) // at load: nothing to do but fail
	}
	go worker()
}

func worker() {
	defer guard()
	var b [1]byte
	for {
		f := pending.Swap(nil)
		if f == nil {
			sleeping.Store(true)
			if f = pending.Swap(nil); f == nil {
				if _, err := wakeR.Read(b[:]); err != nil {
					broken("the worker's pipe: " + err.Error())
				}
				f = pending.Swap(nil) // nil for a byte written for a call taken already
			}
			sleeping.Store(false)
		}
		if f != nil {
			(*f)()
		}
	}
}

// async runs f on the worker and returns at once; the C caller waits in
// sperligo_wait(d) for f's code. Every pointer f uses is the C caller's and
// stays valid while it waits.
func async(d *C.sperligo_done, f func() C.int) {
	if direct || onCaller.Load() {
		func() {
			defer guard()
			d.rc = f()
			C.sperligo_done_here(d)
		}()
		return
	}
	call := func() {
		defer guard()
		d.rc = f()
		C.sperligo_wake(d)
	}
	if !pending.CompareAndSwap(nil, &call) {
		broken("a call reached the worker while another was pending")
	}
	if sleeping.CompareAndSwap(true, false) {
		if _, err := wakeW.Write([]byte{1}); err != nil {
			broken("the worker's pipe: " + err.Error())
		}
	}
}

// guard turns a panic into the broken-promise exit. Every export defers it.
func guard() {
	if r := recover(); r != nil {
		broken(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
	}
}

// broken ends the process: a promise of the library itself is broken.
func broken(why string) {
	fmt.Fprintf(os.Stderr, "libsperli: broken promise, aborting: %s\n", why)
	C.abort()
}

// code records err and returns the C code for it (0 for nil).
func code(err error) C.int {
	if err == nil {
		return 0
	}
	if codes.As(err) == nil {
		err = settle(err)
	}
	e := codes.As(err)
	var rc C.int
	switch {
	case e.Code == codes.OutOfRange:
		broken("the runtime refused an argument sperli.c had checked: " + err.Error())
	case e.Code == codes.Finished:
		rc = eFinished
	case e.Code.Valid():
		rc = C.int(e.Code)
	default:
		broken("the runtime returned an unknown code: " + err.Error())
	}
	lastErr, lastCode = err, rc
	if sess != nil && !sess.moving && sess.c.Recovering() {
		return sess.recover()
	}
	return rc
}

// recover follows the session into the next generation after its own was
// abandoned (in-place recovery, SPEC §10.2): every call of the old one
// fails, so the first that does waits here (Comm.Next) until this slot is
// a rank of the next generation, which becomes the session's world. The
// call answers SPERLI_E_RECOVERED, with the loss as its message; the
// program calls sperli_resume and goes on from the restored state. What
// belonged to the old generation is dropped: the kept result, the open
// operations, the communicators made by split (sperli.c marks them). When
// the job ends instead (no spare left, another loss it cannot survive),
// the call answers the job's end code.
func (s *session) recover() C.int {
	why := lastErr
	s.moving = true
	defer func() { s.moving = false }()
	nc, err := s.c.Next(ctx)
	if err != nil {
		return code(err)
	}
	s.enter(nc)
	s.ops = nil
	lastErr = fmt.Errorf("%v; this rank is rank %d of generation %d now (slot %d): resume", why, nc.Rank(), nc.Generation(), nc.Slot())
	lastCode = eRecovered
	return eRecovered
}

// enter makes nc, the job's communicator of a later generation (recovery,
// shrink, grow), the session's world. The kept result was the old
// generation's: it is dropped, not released to the new one.
func (s *session) enter(nc *runtime.Comm) {
	s.c = nc
	s.comms[0] = nc
	s.result = nil
}

// settle turns an error without a code into the code of the job's end. A
// write can fail (the connection broke) a moment before the runtime has
// declared the loss; the loss follows at once when the reader sees the
// broken connection, or at the latest after the silence limit. If it does
// not come, the job is failed with H1611 here.
func settle(err error) error {
	if sess == nil {
		broken("the runtime returned an error without a code: " + err.Error())
	}
	c := sess.c
	wait := time.Duration(job.DefaultSilenceMS+1000) * time.Millisecond
	if ms := c.Job().SilenceMS; ms > 0 {
		wait = time.Duration(ms+1000) * time.Millisecond
	}
	for end := time.Now().Add(wait); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if e := c.Heartbeat(); codes.As(e) != nil {
			return e
		}
	}
	e := codes.Wrap(codes.PeerLost, err, "connection failed: %v", err)
	c.Fail(e)
	return e
}

// cbytes is n bytes of C memory at p as a slice, without a copy; nil for
// none. The runtime must not keep it after the call.
func cbytes(p unsafe.Pointer, n C.size_t) []byte {
	if n == 0 || p == nil {
		return nil
	}
	if uint64(n) > math.MaxInt {
		broken(fmt.Sprintf("a length of %d bytes reached the Go layer", uint64(n)))
	}
	return unsafe.Slice((*byte)(p), int(n))
}

// collData is cbytes for a collective's data. Data over the limit is shown
// to the runtime as one byte over it: the runtime voids the call (H1618)
// from the length alone and reads none of it, and the cap keeps
// unsafe.Slice within its bounds for any size_t.
func collData(p unsafe.Pointer, n C.size_t) []byte {
	if n > runtime.MaxCollective {
		n = runtime.MaxCollective + 1
	}
	return cbytes(p, n)
}

func need() *session {
	if sess == nil {
		broken("a call without a session reached the Go layer")
	}
	return sess
}

// keep stores a call's result and tells its length. The result it replaces
// can no longer be copied out, so its buffer goes back to the runtime for
// the next message (Release). A refusal leaves no result; a negative code
// (SPERLI_E_FINISHED) leaves the earlier one, as sperli.c keeps its length.
func (s *session) keep(b []byte, err error, outlen *C.size_t) C.int {
	var rc C.int
	if err != nil {
		if rc = code(err); rc < 0 {
			return rc
		}
	}
	if s.result != nil && s.c != nil {
		s.c.Release(s.result)
	}
	s.result = b
	if err != nil {
		s.result = nil
	}
	*outlen = C.size_t(len(s.result))
	return rc
}

func info(c *runtime.Comm, rank, size *C.int, inc *C.uint32_t, jobID *C.char) {
	*rank = C.int(c.Rank())
	*size = C.int(c.Size())
	*inc = C.uint32_t(c.Incarnation())
	id := c.JobID()
	dst := unsafe.Slice((*byte)(unsafe.Pointer(jobID)), 33)
	n := copy(dst[:32], id)
	dst[n] = 0
}

//export sperligo_init
func sperligo_init(line *C.char, n C.size_t, fromStdin C.int, rank, size *C.int, inc *C.uint32_t, jobID *C.char, d *C.sperligo_done) {
	defer guard()
	var b []byte
	if fromStdin == 0 {
		b = C.GoBytes(unsafe.Pointer(line), C.int(n))
	}
	async(d, func() C.int { return initJob(b, fromStdin != 0, rank, size, inc, jobID) })
}

func initJob(line []byte, fromStdin bool, rank, size *C.int, inc *C.uint32_t, jobID *C.char) C.int {
	if sess != nil {
		broken("init with a session open reached the Go layer")
	}
	ended = nil
	var j *runtime.Job
	var err error
	if fromStdin {
		if watched {
			// The runtime's watcher of the earlier session reads standard
			// input until its end: there is no description line left.
			return code(codes.New(codes.JobMalformed, "job description missing: standard input is the launcher's control channel of an earlier session"))
		}
		j, err = runtime.ReadJob(os.Stdin)
	} else {
		j, err = job.Parse(line)
		if err == nil && j.Launched {
			// The rest of standard input is the launcher's control channel
			// (SPEC §3): the program read the first line itself.
			j.Control = os.Stdin
		}
	}
	if err != nil {
		return code(err)
	}
	lastJob = j
	if j.Launched && j.Control == os.Stdin {
		// From here on the runtime may read standard input to its end
		// (the control channel), whether or not the join succeeds.
		watched = true
	}
	c, err := runtime.Init(ctx, j)
	if err != nil {
		if codes.As(err) == nil {
			// The runtime's own listen failure carries no code; errors.md
			// gives it H1610.
			err = codes.Wrap(codes.Unreachable, err, "%v", err)
		}
		if e := codes.As(err); e.Code == codes.OutOfRange {
			// An environment variable of the runtime outside its range
			// (SPERLI_SPIN_US): no argument of sperli.c's to blame, so it
			// is answered as the Go rank's H1616 (sperli.c's gone_init).
			lastErr, lastCode = err, C.int(e.Code)
			return lastCode
		}
		return code(err)
	}
	spared = false
	c.Started() // the launcher's time of a restart
	if c.Spare() {
		// A spare (SPEC §10.1) waits here until it takes a lost rank's
		// place — then the program runs as that rank and resumes its
		// state — or until the job finished without it.
		nc, err := c.Next(ctx)
		if err == runtime.ErrSpareDone {
			if err := c.Finish(); err != nil {
				return code(err)
			}
			spared = true
			lastErr, lastCode = fmt.Errorf("slot %d: %w", c.Slot(), err), notNeeded
			return notNeeded
		}
		if err != nil {
			c.Close()
			return code(err)
		}
		c = nc
	}
	setSession(&session{c: c, comms: []*runtime.Comm{c}})
	info(c, rank, size, inc, jobID)
	return 0
}

// sendBuf is the C buffer of a message to dest on c as the runtime gets
// it: without a copy, save for a message to this rank itself, which the
// runtime keeps after the call, and save in a job that can outlive a loss
// (spares, or set_on_loss return): there a send cut short by the loss
// may leave its frame queued on a connection that stays open (the next
// generation uses it), to be written after the call has returned, so the
// runtime gets bytes of its own.
func sendBuf(c *runtime.Comm, dest C.int, data unsafe.Pointer, n C.size_t) []byte {
	b := cbytes(data, n)
	if int(dest) == c.Rank() || c.Job().Spares > 0 || sess.lossReturn {
		b = append([]byte(nil), b...)
	}
	return b
}

// sent settles the code of a call that handed a C buffer to the runtime
// without a copy: when the job has ended, a frame of the message may still
// wait in a queue, and closing the job's communicator stops the writers,
// so nothing reads the caller's buffer after the call returns. A job that
// outlives losses is not closed (sendBuf copied).
func (s *session) sent(rc C.int) C.int {
	if rc != 0 && rc != eFinished && rc != eRecovered && s.c.Job().Spares == 0 && !s.lossReturn {
		s.c.Close()
	}
	return rc
}

//export sperligo_send
func sperligo_send(ci, dest, tag C.int, data unsafe.Pointer, n C.size_t) C.int {
	defer guard()
	s := need()
	c := s.at(ci)
	return s.sent(code(c.Send(ctx, int(dest), int(tag), sendBuf(c, dest, data, n))))
}

// envelope writes what a receive got.
func envelope(env runtime.Envelope, src, tag *C.int) {
	*src, *tag = C.int(env.Source), C.int(env.Tag)
}

//export sperligo_recv
func sperligo_recv(ci, src, tag C.int, outlen *C.size_t, gotSrc, gotTag *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.at(ci)
	async(d, func() C.int {
		b, env, err := c.RecvFrom(ctx, int(src), int(tag))
		if err == nil {
			envelope(env, gotSrc, gotTag)
		}
		return s.keep(b, err, outlen)
	})
}

//export sperligo_probe
func sperligo_probe(ci, src, tag C.int, outlen *C.size_t, gotSrc, gotTag *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.at(ci)
	async(d, func() C.int {
		env, err := c.Probe(ctx, int(src), int(tag))
		if err != nil {
			return code(err)
		}
		envelope(env, gotSrc, gotTag)
		*outlen = C.size_t(env.Length)
		return 0
	})
}

//export sperligo_iprobe
func sperligo_iprobe(ci, src, tag C.int, found *C.int, outlen *C.size_t, gotSrc, gotTag *C.int) C.int {
	defer guard()
	env, ok, err := need().at(ci).Iprobe(int(src), int(tag))
	if err != nil {
		return code(err)
	}
	*found = 0
	if ok {
		*found = 1
		envelope(env, gotSrc, gotTag)
		*outlen = C.size_t(env.Length)
	}
	return 0
}

//export sperligo_sendrecv
func sperligo_sendrecv(ci, dest, sendtag C.int, data unsafe.Pointer, n C.size_t, src, recvtag C.int, outlen *C.size_t, gotSrc, gotTag *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.at(ci)
	b := sendBuf(c, dest, data, n)
	async(d, func() C.int {
		got, env, err := c.Sendrecv(ctx, int(dest), int(sendtag), b, int(src), int(recvtag))
		if err == nil {
			envelope(env, gotSrc, gotTag)
		}
		return s.sent(s.keep(got, err, outlen))
	})
}

func (s *session) put(slot C.int, c *runtime.Comm, op any) {
	i := int(slot)
	for len(s.ops) <= i {
		s.ops = append(s.ops, openOp{})
	}
	if s.ops[i].op != nil {
		broken(fmt.Sprintf("operation slot %d is taken", i))
	}
	s.ops[i] = openOp{c, op}
}

func (s *session) take(slot C.int) openOp {
	i := int(slot)
	if i < 0 || i >= len(s.ops) || s.ops[i].op == nil {
		broken(fmt.Sprintf("operation slot %d is empty", i))
	}
	op := s.ops[i]
	s.ops[i] = openOp{}
	return op
}

//export sperligo_start_send
func sperligo_start_send(slot, ci, dest, tag C.int, data unsafe.Pointer, n C.size_t) C.int {
	defer guard()
	s := need()
	c := s.at(ci)
	b := append([]byte(nil), cbytes(data, n)...) // kept until written
	op, err := c.StartSend(int(dest), int(tag), b)
	if err != nil {
		return code(err)
	}
	s.put(slot, c, op)
	return 0
}

//export sperligo_finish_send
func sperligo_finish_send(slot C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	o := s.take(slot)
	op, ok := o.op.(*runtime.SendOp)
	if !ok {
		broken("finish_send of an operation that is no send")
	}
	async(d, func() C.int { return code(o.c.FinishSend(ctx, op)) })
}

//export sperligo_start_recv
func sperligo_start_recv(slot, ci, src, tag C.int) C.int {
	defer guard()
	s := need()
	c := s.at(ci)
	op, err := c.StartRecv(int(src), int(tag))
	if err != nil {
		return code(err)
	}
	s.put(slot, c, op)
	return 0
}

//export sperligo_finish_recv
func sperligo_finish_recv(slot C.int, outlen *C.size_t, gotSrc, gotTag *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	o := s.take(slot)
	op, ok := o.op.(*runtime.RecvOp)
	if !ok {
		broken("finish_recv of an operation that is no receive")
	}
	async(d, func() C.int {
		b, err := o.c.FinishRecv(ctx, op)
		if err == nil {
			envelope(op.Envelope(), gotSrc, gotTag)
		}
		return s.keep(b, err, outlen)
	})
}

// collective runs f, a collective on communicator ci that makes data, and
// keeps its result.
func collective(ci C.int, outlen *C.size_t, d *C.sperligo_done, f func(c *runtime.Comm) ([]byte, error)) {
	s := need()
	c := s.at(ci)
	async(d, func() C.int {
		b, err := f(c)
		return s.keep(b, err, outlen)
	})
}

//export sperligo_barrier
func sperligo_barrier(ci C.int, d *C.sperligo_done) {
	defer guard()
	c := need().at(ci)
	async(d, func() C.int { return code(c.Barrier(ctx)) })
}

//export sperligo_bcast
func sperligo_bcast(ci, root C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Bcast(ctx, int(root), collData(data, n))
	})
}

//export sperligo_reduce
func sperligo_reduce(ci, root, typ, op C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Reduce(ctx, int(root), runtime.Type(typ), runtime.Op(op), collData(data, n))
	})
}

//export sperligo_allreduce
func sperligo_allreduce(ci, typ, op C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Allreduce(ctx, runtime.Type(typ), runtime.Op(op), collData(data, n))
	})
}

//export sperligo_reduce_scatter
func sperligo_reduce_scatter(ci, typ, op C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.ReduceScatter(ctx, runtime.Type(typ), runtime.Op(op), collData(data, n))
	})
}

//export sperligo_gather
func sperligo_gather(ci, root C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Gather(ctx, int(root), collData(data, n))
	})
}

//export sperligo_scatter
func sperligo_scatter(ci, root C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Scatter(ctx, int(root), collData(data, n))
	})
}

//export sperligo_allgather
func sperligo_allgather(ci C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Allgather(ctx, collData(data, n))
	})
}

//export sperligo_alltoall
func sperligo_alltoall(ci C.int, data unsafe.Pointer, n C.size_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	collective(ci, outlen, d, func(c *runtime.Comm) ([]byte, error) {
		return c.Alltoall(ctx, collData(data, n))
	})
}

// sperligo_split makes the communicators of a split of ci; this rank's new
// one (joined 1) becomes index next, the one sperli.c gives it.
//
//export sperligo_split
func sperligo_split(ci, color, key, next C.int, joined, rank, size *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.at(ci)
	if int(next) != len(s.comms) {
		broken(fmt.Sprintf("split into communicator %d, %d made", int(next), len(s.comms)))
	}
	async(d, func() C.int {
		sub, err := c.Split(ctx, int(color), int(key))
		if err != nil {
			return code(err)
		}
		*joined = 0
		if sub != nil {
			s.comms = append(s.comms, sub)
			*joined, *rank, *size = 1, C.int(sub.Rank()), C.int(sub.Size())
		}
		return 0
	})
}

// sperligo_comm_free ends communicator ci (made by split): the runtime's
// Finish of a sub-communicator, which is local.
//
//export sperligo_comm_free
func sperligo_comm_free(ci C.int) C.int {
	defer guard()
	s := need()
	if ci == 0 {
		broken("comm_free of the session's communicator reached the Go layer")
	}
	return code(s.at(ci).Finish())
}

// Losses (SPEC §10.3).

//export sperligo_set_on_loss
func sperligo_set_on_loss(ci, mode C.int) C.int {
	defer guard()
	s := need()
	m := runtime.LossRecover
	if mode == 1 {
		m = runtime.LossReturn
	}
	rc := code(s.at(ci).SetOnLoss(m))
	if rc == 0 {
		s.lossReturn = m == runtime.LossReturn
	}
	return rc
}

// sperligo_failed writes the count of the ranks of ci known lost and, when
// capacity holds them, the ranks.
//
//export sperligo_failed
func sperligo_failed(ci C.int, buf *C.int, capacity C.size_t, n *C.size_t) C.int {
	defer guard()
	f := need().at(ci).Failed()
	*n = C.size_t(len(f))
	if len(f) > 0 && uint64(capacity) >= uint64(len(f)) {
		dst := unsafe.Slice(buf, len(f))
		for i, r := range f {
			dst[i] = C.int(r)
		}
	}
	return 0
}

//export sperligo_revoke
func sperligo_revoke(ci C.int) C.int {
	defer guard()
	return code(need().at(ci).Revoke())
}

//export sperligo_agree
func sperligo_agree(ci C.int, flag *C.uint64_t, d *C.sperligo_done) {
	defer guard()
	c := need().at(ci)
	in := uint64(*flag)
	async(d, func() C.int {
		v, err := c.Agree(ctx, in)
		if err != nil {
			return code(err)
		}
		*flag = C.uint64_t(v)
		return 0
	})
}

// sperligo_regroup is shrink (grow 0) or grow (1) of the job's
// communicator; the new one becomes the session's world. *moved is 1 when
// it is another generation's (communicators made by split end with the
// old one).
//
//export sperligo_regroup
func sperligo_regroup(grow C.int, moved *C.int, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.c
	async(d, func() C.int {
		f := c.Shrink
		if grow != 0 {
			f = c.Grow
		}
		nc, err := f(ctx)
		if err != nil {
			return code(err)
		}
		*moved = 0
		if nc != c {
			s.enter(nc)
			*moved = 1
		}
		return 0
	})
}

// sperligo_where tells the session's world as it is now: after a join, a
// recovery, a shrink or a grow.
//
//export sperligo_where
func sperligo_where(rank, size *C.int, gen *C.uint32_t, slot *C.int) {
	defer guard()
	c := need().c
	*rank, *size, *gen, *slot = C.int(c.Rank()), C.int(c.Size()), C.uint32_t(c.Generation()), C.int(c.Slot())
}

// sperligo_layout writes the slot of each rank of the job's generation
// when capacity holds them, and their count.
//
//export sperligo_layout
func sperligo_layout(buf *C.int, capacity C.size_t, n *C.size_t) {
	defer guard()
	l := need().c.Layout()
	*n = C.size_t(l.Size())
	if l.Size() > 0 && uint64(capacity) >= uint64(l.Size()) {
		dst := unsafe.Slice(buf, l.Size())
		for i, sl := range l.All() {
			dst[i] = C.int(sl)
		}
	}
}

//export sperligo_set_silence
func sperligo_set_silence(ms C.int) C.int {
	defer guard()
	return code(need().c.SetSilence(int(ms)))
}

//export sperligo_heartbeat
func sperligo_heartbeat() C.int {
	defer guard()
	return code(need().c.Heartbeat())
}

//export sperligo_abort
func sperligo_abort() C.int {
	defer guard()
	s := need()
	err := s.c.Abort()
	setSession(nil)
	ended = codes.New(codes.Finished, "the communicator was aborted")
	return code(err)
}

//export sperligo_finish
func sperligo_finish(d *C.sperligo_done) {
	defer guard()
	s := need()
	async(d, func() C.int {
		if s.c.Recovering() {
			// The generation was abandoned before this rank finished: it
			// follows into the next (a Finish would close the job's
			// connections, which the next generation uses).
			err := s.c.Heartbeat() // its error: the generation's end
			if err == nil {
				err = codes.New(codes.PeerLost, "finish: the generation was abandoned for the next")
			}
			return code(err)
		}
		err := s.c.Finish()
		setSession(nil)
		return code(err)
	})
}

//export sperligo_use_checkpoints
func sperligo_use_checkpoints(dir *C.char) C.int {
	defer guard()
	return code(need().c.UseCheckpoints(C.GoString(dir)))
}

//export sperligo_checkpoint
func sperligo_checkpoint(data unsafe.Pointer, n C.size_t, d *C.sperligo_done) {
	defer guard()
	s := need()
	// Checkpoint copies the state into its file before it returns and
	// keeps nothing of it.
	async(d, func() C.int { return code(s.c.Checkpoint(ctx, cbytes(data, n))) })
}

//export sperligo_resume
func sperligo_resume(found *C.int, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	s := need()
	async(d, func() C.int {
		b, ok, err := s.c.Resume(ctx)
		*found = 0
		if err == nil && ok {
			*found = 1
		}
		return s.keep(b, err, outlen)
	})
}

//export sperligo_result
func sperligo_result(buf unsafe.Pointer, n C.size_t) C.int {
	defer guard()
	s := need()
	if int(n) != len(s.result) {
		broken(fmt.Sprintf("result of %d bytes copied as %d", len(s.result), n))
	}
	if n > 0 {
		copy(unsafe.Slice((*byte)(buf), int(n)), s.result)
	}
	return 0
}

// sperligo_error copies the text of the last error this layer returned
// into buf (cap bytes, NUL-terminated, cut if need be) and returns the
// length of the whole text.
//
//export sperligo_error
func sperligo_error(buf *C.char, cap C.size_t) C.size_t {
	defer guard()
	msg := ""
	if lastErr != nil {
		msg = lastErr.Error()
	}
	if cap > 0 {
		// Never more than the message and its NUL, whatever cap says.
		n := min(uint64(cap), uint64(len(msg))+1)
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		k := copy(dst[:n-1], msg)
		dst[k] = 0
	}
	return C.size_t(len(msg))
}

// sperligo_exit ends the program's use of the library like runtime.Exit:
// code 0 finishes the session; another code fails it (its peers learn the
// cause). err is msg when sperli.c gives one (the text of a negative code
// it made), else the error of the last call when code is its code, else a
// text naming the code. It
// writes the status record when the job was started by a launcher (or no
// job description was read) and returns the exit status.
//
//export sperligo_exit
func sperligo_exit(rc C.int, msg *C.char) C.int {
	defer guard()
	var err error
	switch {
	case rc == 0:
	case rc == notNeeded && spared && sess == nil:
		// A spare the job finished without: its end is a success.
	case msg != nil:
		err = errors.New(C.GoString(msg))
	case lastErr != nil && lastCode == rc:
		err = lastErr
	case rc >= 1601 && rc <= 1628:
		err = codes.New(codes.Code(rc), "the program ended with this code")
	default:
		err = fmt.Errorf("libsperli: the program ended with code %d", int(rc))
	}
	if sess != nil {
		st := runtime.Exit(sess.c, err)
		setSession(nil)
		return C.int(st)
	}
	if err == nil {
		err = ended
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	// A rank started by hand never shows the launcher's record: only one
	// whose description says a launcher started it, or, with none read,
	// whose environment does (record.LaunchedEnv).
	if (lastJob != nil && lastJob.Launched) || (lastJob == nil && os.Getenv(record.LaunchedEnv) == "1") {
		runtime.WriteStatus(os.Stderr, err)
	}
	return C.int(runtime.ExitStatus(err))
}
