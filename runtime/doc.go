// Package runtime is the Sperli core that every rank runs, whatever it is
// written in: the job description, the mutual-TLS join, point-to-point
// messages, failure detection, and collectives (SPEC §6–§8, §15). It knows
// nothing of Starlark or the command line; starlib and the sperli binary
// are built on it, and any Go program can embed it.
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
// Every refusal is a *codes.Error (runtime.Error) whose Code is one of
// SPEC §13; errors.As finds it. A Comm is safe for concurrent use: point-to-
// point calls may come from several goroutines; collectives are serialised
// in the order they are called. Buffers passed to Send belong to the
// runtime from the call on; buffers returned belong to the caller.
//
// Goroutines: per peer connection one reader and one writer (the only code
// that touches the socket); one monitor per Comm (heartbeats, silence
// limit); one watcher of the launcher's control channel for launched ranks.
// Close (through Finish, Abort, Fail or Exit) stops and waits for them all.
package runtime

import "sperli/codes"

// Error is the error type of every refusal (the leaf package codes holds it
// so that wire and pki share it).
type Error = codes.Error

// Code is a refusal code of SPEC §13.
type Code = codes.Code
