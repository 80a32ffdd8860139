// Package runtime is the Sperli core that every rank runs, whatever it is
// written in: the mutual-TLS join, point-to-point messages, failure
// detection, collectives, checkpoints and recovery (SPEC §6–§10, §15). It
// knows nothing of Starlark or the command line; starlib and the sperli
// binary are built on it, and any Go program can embed it. The job
// description is package job's (Job, Host and ReadJob here are its);
// what a launched rank writes for its launcher is package record's.
//
// A rank reads its job description (the first line of standard input when
// a launcher started it), joins, works, and exits with the status Exit
// gives:
//
//	func main() { os.Exit(run()) }
//
//	func run() int {
//		job, err := runtime.ReadJob(os.Stdin)
//		if err != nil {
//			return runtime.Exit(nil, err)
//		}
//		ctx := context.Background()
//		c, err := runtime.Init(ctx, job)
//		if err != nil {
//			return runtime.Exit(nil, err)
//		}
//		part := []byte{...} // this rank's int64 partial sum, little-endian
//		total, err := c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, part)
//		...
//		return runtime.Exit(c, err)
//	}
//
// Started by srun --mpi=pmi2 with nothing on standard input, the same
// ReadJob makes the description through PMI-1 with the other tasks of the
// step (job.FromPMI, SPEC §17): the program does not change.
//
// The process shell (shell.go) is what a rank does as a process: Init,
// Run's and Exit's records on standard error, the control channel on
// standard input, the process's end. The rest of the package writes to no
// stream, reads no environment variable and ends no process; it calls back
// what the shell gave it (proc.go). A Job with Net set listens and dials
// through that network instead of TCP (package memnet: tests and
// simulations).
//
// Every refusal is a *codes.Error (runtime.Error) whose Code is one of
// SPEC §13; errors.As finds it. A Comm is safe for concurrent use: point-to-
// point calls may come from several goroutines; collectives are serialised
// in the order they are called. Buffers passed to Send belong to the
// runtime from the call on; buffers returned belong to the caller, who may
// hand a received buffer back with Release for the next message (as an MPI
// program receives into one buffer again); that is optional.
//
// Collectives. The algorithms of the collective calls, and the table that
// chooses one for each call by kind, rank count and size, are package
// sched's (runtime/sched); a call runs its schedule over a collCall, the
// sched.Link that carries the call's frames behind its descriptor, and
// folds reductions by the sched.Fold of its type and op (coll.go,
// reduce.go).
//
// Waits. A receive that finds nothing polls its socket for up to
// SPERLI_SPIN_US microseconds (default 1000) before it blocks, as MPI ranks
// poll; a rank whose host runs more ranks of the job than it has
// processors does not spin (the default becomes 0). SPERLI_SPIN_US=0 never
// spins: the least CPU, slower round trips (docs/design.md, "The
// low-latency wait").
//
// Goroutines: per peer connection one reader and one writer (with the
// receivers, the only code that touches the socket); one monitor per
// process's slot (heartbeats and the silence limit of every peer); one
// recovery goroutine (losses, the agreement on the next generation); the
// accept loop of the slot's listener, and a goroutine per accepted
// connection for its TLS handshake and join (join.go; acceptWG); one
// dialer per link being made (linkset.go's dialer, until it attaches or
// its deadline; dialWG); a closer per link ended gracefully (closePeers,
// and a link dropped while its last frame is under way: each waits at
// most a second); for launched ranks one watcher of the launcher's
// control channel, one taker of the crashes the launcher tells
// (takeCrashes, for the slot's life), and the shell's reader of standard
// input. Close (through Finish, Abort, Fail or Exit) stops and waits for
// the readers, writers, monitor, recovery goroutine, accept loop and
// dialers, and ends the watcher; the shell's reader lives as long as
// standard input (close_test.go counts goroutines after a job and after
// an in-place recovery). A work queue's goroutines are package workq's
// (its package documentation lists them).
package runtime

import "sperli/codes"

// Error is the error type of every refusal (the leaf package codes holds it
// so that wire and pki share it).
type Error = codes.Error

// Code is a refusal code of SPEC §13.
type Code = codes.Code
