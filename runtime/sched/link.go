package sched

import "sperli/wire"

// Link is one collective call of one rank as a schedule sees it: the
// rank, the size, and frames to and from the other ranks of the call. A
// schedule does nothing else; what a Link does below (descriptors,
// sockets, credits, voids, failures) is the Link's. A Link serves one
// call on one goroutine: it need not be safe for concurrent use.
type Link interface {
	// Rank is this rank's number in the call, 0 … Size()-1.
	Rank() int
	// Size is the number of ranks in the call.
	Size() int
	// Seq is the call's number in its communicator's sequence of
	// collective calls, as mismatch messages name it.
	Seq() uint64
	// Describe names the call as mismatch messages name it, e.g.
	// "reduce(root 0, int64, sum)". Only error paths call it.
	Describe() string
	// Send sends rank to one frame of the call: a result (ack) or data
	// going on (not ack). data is not copied: the schedule does not change
	// it until the call's frames are written, which the Link sees to
	// after the schedule returns. The schedule returns an error of Send
	// as it is.
	Send(to int, ack bool, data []byte) error
	// Take returns the call's next frame from rank from, waiting for it.
	// The frame's buffers are the schedule's until it calls Release (or
	// returns Data as its result). The schedule returns an error of Take
	// as it is.
	Take(from int) (Frame, error)
	// Release gives back a frame Take returned, once the schedule has
	// copied its data out; neither Data nor Buf is used after it.
	// Releasing is optional: a frame never released is garbage.
	Release(f Frame)
	// Mismatch reports that the ranks disagree about the call (H1613: a
	// frame this rank's schedule does not expect, contributions of
	// different lengths) and returns the error the schedule returns. The
	// message is format and args as fmt.Sprintf makes it.
	Mismatch(format string, args ...any) error
	// Partners names ranks the schedule will send to or take from in this
	// call, before its first frame to or from them, so that the Link may
	// make their connections now and together: a parent that takes from
	// its kids one after another would otherwise wait for each kid's
	// connection in turn. It is a hint: a rank named may go unused, and a
	// schedule may use a rank it did not name. Out-of-range ranks and the
	// Link's own rank are ignored.
	Partners(ranks ...int)
}

// Frame is a frame of the call, as Link.Take returns it.
type Frame struct {
	// Ack is set on a result, clear on data going on.
	Ack bool
	// Len is the length the sender's call descriptor gives: the sender's
	// data per rank (the root's data in a bcast's announcement).
	Len int
	// Data is the frame's data.
	Data []byte
	// Buf is the buffer Data lies in, for the Link's Release.
	Buf []byte
}

// Fold is the typed reduction ∘ of a reduce, allreduce or reduce_scatter
// call. Every schedule folds in rank order, ((r0 ∘ r1) ∘ r2) …, into a
// new buffer: acc starts as First(acc, x0), then Next(acc, x1),
// Next(acc, x2), … (a block at a time where the schedule cuts blocks), so
// float results are the bytes of the sequential fold whatever the
// schedule. acc and x have the same length, a whole number of elements;
// acc starts at an address aligned to Elem, and so does x in Next (the
// schedule copies an unaligned one first). The methods must not keep acc
// or x; calls running at once may share a Fold, so they must be safe for
// concurrent use (a Fold without state is).
type Fold interface {
	// Elem is the size of one element in bytes (a power of two, at most 8):
	// blocks are cut at whole elements.
	Elem() int
	// First sets acc to the fold of x alone (a copy; the logical
	// reductions make every element 0 or 1).
	First(acc, x []byte)
	// Next sets acc to acc ∘ x, element by element.
	Next(acc, x []byte)
}

// Call is one collective call as Run takes it.
type Call struct {
	// Kind is the call's kind, one the table has schedules for: barrier
	// to reduce_scatter.
	Kind wire.CollKind
	// Root is the root of bcast, reduce, gather and scatter; 0 for the
	// other kinds. Every rank gives the same root.
	Root int
	// Data is this rank's data; off the root of bcast and scatter it is
	// ignored. Schedules do not change it, and frames sent may alias it
	// until they are written.
	Data []byte
	// Fold is the reduction of reduce, allreduce and reduce_scatter; nil
	// for the other kinds.
	Fold Fold
	// n is the bytes per rank the table chose by (Run sets it).
	n int
}
