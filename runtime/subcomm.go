package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"sperli/codes"
	"sperli/wire"
)

// Sub-communicators (SPEC §8.1 split). A communicator made by Split is a
// *Comm of its own — ranks, size, tags, collective sequence — over the
// job's connections (core). Its frames carry its id: in the seq field of
// data frames, in the tag field of collective frames (protocol.md §8.6),
// so its messages never match another communicator's.

// earlyFrame is a collective frame for a communicator this rank has not
// made yet, kept until it is.
type earlyFrame struct {
	from    int // job rank
	h       wire.Header
	payload []byte
}

// worldRank is the job rank of rank r of c.
func (c *Comm) worldRank(r int) int {
	if c.members == nil {
		return r
	}
	return c.members[r]
}

// rankOf is the rank in c of job rank w, or -1 when w is not in c.
func (c *Comm) rankOf(w int) int {
	if c.members == nil {
		return w
	}
	if r, ok := c.local[w]; ok {
		return r
	}
	return -1
}

// peerAt is the link to rank r of c, or nil (this rank itself, or no link
// yet).
func (c *Comm) peerAt(r int) *peer { return c.peerRank(c.worldRank(r)) }

// linkAt is the link to rank r of c, made now if there is none (nil for
// this rank itself).
func (c *Comm) linkAt(r int) *peer { return c.linkRank(c.worldRank(r)) }

// collLinkAt is the link for a collective's frame to rank r. In a
// collective the lower slot of a pair makes a missing link: it dials the
// higher when it sends to it or takes from it (collCall.Take), so a
// frame to a lower slot waits up to a silence limit for that slot's dial
// before this one dials itself. A schedule in which both ranks of a pair
// send to each other (a pairwise alltoall) so costs one handshake a pair,
// not two that race, and one in which the lower never takes from this
// rank (a mismatch the frame would reveal) still gets its link.
func (c *Comm) collLinkAt(r int) *peer {
	s := c.layout.Slot(c.worldRank(r))
	if s < 0 {
		return nil
	}
	if s < c.links.self {
		return c.links.linkAfter(s, c.links.silence())
	}
	return c.links.link(s)
}

// Sub reports whether c was made by Split.
func (c *Comm) Sub() bool { return c.members != nil }

// splitRecord is one rank's part of a split: its color, key and the
// lowest communicator id it may give.
const splitRecord = 12

// Split makes new communicators of the ranks of c (SPEC §8.1): ranks that
// give the same color (an int ≥ 0) form one, ordered by key and then by
// their rank in c; a rank giving color -1 gets none (nil). It is a
// collective call on c. A color below -1 is H1618, as any wrong argument
// of a collective. The new communicator has its own ranks, size, tags and
// collective sequence, shares the job's connections and ends with the job;
// point-to-point on it never matches messages of another.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	argErr := ""
	switch {
	case color < -1 || color > 1<<31-1:
		argErr = fmt.Sprintf("split: color %d, want -1 (none) or 0 … 2147483647", color)
	case key < -1<<31 || key > 1<<31-1:
		argErr = fmt.Sprintf("split: key %d is outside the 32-bit range", key)
	}
	c.mu.Lock()
	next := c.nextCtx
	c.mu.Unlock()
	rec := make([]byte, 0, splitRecord)
	rec = binary.BigEndian.AppendUint32(rec, uint32(int32(color)))
	rec = binary.BigEndian.AppendUint32(rec, uint32(int32(key)))
	rec = binary.BigEndian.AppendUint32(rec, next)
	mine := wire.Call{Kind: wire.CollSplit, Length: splitRecord}
	all, err := c.collectiveWith(ctx, mine, argErr, func(cc *collCall) ([]byte, error) {
		return cc.star(rec, func(contrib [][]byte) ([]byte, [][]byte, error) {
			out := concat(contrib)
			res := make([][]byte, c.size)
			for i := range res {
				res[i] = out
			}
			return append([]byte{}, out...), res, nil
		})
	})
	if err != nil {
		return nil, err
	}
	if len(all) != splitRecord*c.size {
		return nil, c.mismatch("split: the ranks' records are %d bytes, want %d", len(all), splitRecord*c.size)
	}
	type entry struct{ color, key, rank int }
	base := uint32(0)
	var entries []entry
	for r := 0; r < c.size; r++ {
		b := all[r*splitRecord:]
		col, k, n := int(int32(binary.BigEndian.Uint32(b))), int(int32(binary.BigEndian.Uint32(b[4:]))), binary.BigEndian.Uint32(b[8:])
		if col < -1 || n == 0 {
			return nil, c.mismatch("split: rank %d sent color %d and first id %d", r, col, n)
		}
		base = max(base, n)
		if col >= 0 {
			entries = append(entries, entry{col, k, r})
		}
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.color != b.color {
			return a.color < b.color
		}
		if a.key != b.key {
			return a.key < b.key
		}
		return a.rank < b.rank
	})
	// Ids: base for the lowest color, base+1 for the next, … — the same on
	// every rank of c, and above every id any of them uses already, so no
	// two communicators a rank belongs to share one.
	var members []int
	id, myID := base, uint32(0)
	for i, e := range entries {
		if i > 0 && e.color != entries[i-1].color {
			id++
		}
		if e.color == color {
			members = append(members, c.worldRank(e.rank))
			myID = id
		}
	}
	ncolors := uint32(0)
	if len(entries) > 0 {
		ncolors = id - base + 1
	}
	if uint64(base)+uint64(ncolors) > wire.MaxTag {
		return nil, codes.New(codes.OutOfRange, "split: no communicator ids left (%d in use)", base)
	}
	c.mu.Lock()
	c.nextCtx = max(c.nextCtx, base+ncolors)
	c.mu.Unlock()
	if color < 0 {
		return nil, nil
	}
	sub := &Comm{core: c.core, size: len(members), ctxID: myID, members: members, local: make(map[int]int, len(members))}
	for r, w := range members {
		sub.local[w] = r
		if w == c.worldRank(c.rank) {
			sub.rank = r
		}
	}
	sub.coll.init()
	c.register(sub)
	return sub, nil
}

// register adds a new communicator and hands it the frames that came for
// it before it was made.
func (c *Comm) register(sub *Comm) {
	c.mu.Lock()
	c.comms[sub.ctxID] = sub
	early := c.early[sub.ctxID]
	delete(c.early, sub.ctxID)
	c.mu.Unlock()
	for _, f := range early {
		if err := sub.collArrive(c.peerRank(f.from), f.h, f.payload); err != nil {
			c.fail(err)
			return
		}
	}
}

// wakeAll wakes every communicator's collective waits: the job ended, or
// a peer said bye.
func (c *Comm) wakeAll() {
	c.mu.Lock()
	comms := make([]*Comm, 0, len(c.comms))
	for _, x := range c.comms {
		comms = append(comms, x)
	}
	c.mu.Unlock()
	for _, x := range comms {
		x.coll.wake(nil)
	}
}

// finishSub ends a sub-communicator: its later calls are H1617; the job
// and its other communicators go on. Like MPI_Comm_free it is not
// collective.
func (c *Comm) finishSub() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callableLocked("finish"); err != nil {
		return err
	}
	c.subDone = true
	return nil
}

// subRefusal is the error of a call a sub-communicator does not make:
// checkpoints are the job's.
func (c *Comm) subRefusal(op string) error {
	if !c.Sub() {
		return nil
	}
	return &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: checkpoints are the job's: call it on the job's communicator, not on one made by split", op)}
}
