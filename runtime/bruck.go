package runtime

// bruck is the allgather of Bruck, Ho, Kipnis, Upfal and Weathersby for
// small blocks: in the round of distance d (1, 2, 4, …) rank i sends rank
// (i − d) mod n the blocks it holds, those of ranks i … i+d−1 (fewer in the
// last round, so that no block comes twice), and takes from rank
// (i + d) mod n the blocks of ranks i+d … . After ⌈log2 n⌉ rounds it holds
// every rank's block. That is ⌈log2 n⌉ steps of latency, one frame sent
// and one taken per step, where the star takes two steps and its root
// serialises 2(n−1) frames; at two ranks it is one exchange. Every rank's
// result depends on a frame from every rank, directly or through others,
// and the distances are all below n, so a rank takes at most one frame
// from any peer in one call. Every block has the call's length, which take
// checks against the sender's descriptor.
//
// It returns the blocks by rank. The reductions fold them in rank order on
// every rank, so every rank computes the same bytes the star's root would.
func (cc *collCall) bruck(data []byte) ([][]byte, error) {
	c := cc.c
	n, me, b := c.size, c.rank, len(data)
	// held[j*b:] is the block of rank (me+j) mod n. Its capacity is the
	// whole, so appending never moves what a frame sent still aliases.
	held := make([]byte, b, n*b)
	copy(held, data)
	for d := 1; d < n; d *= 2 {
		cnt := min(d, n-d)
		if err := cc.send((me-d+n)%n, 0, held[:cnt*b]); err != nil {
			return nil, err
		}
		f, err := cc.takeChunk((me+d)%n, false, cnt*b)
		if err != nil {
			return nil, err
		}
		held = append(held, f.data...)
		putBuf(f.buf)
	}
	out := make([][]byte, n)
	for j := range n {
		out[(me+j)%n] = held[j*b : (j+1)*b]
	}
	return out, nil
}

// bruckMax is the most data (all ranks' blocks together) that the
// small-call schedules gather with bruck: every rank then holds, and for a
// reduction folds, all of it.
const bruckMax = 64 << 10

// bruckRanks is the most ranks a small call runs by bruck on: beyond it
// the star. On this project's two-core machine, where more ranks than
// cores block instead of spinning and every step costs each rank a
// wake-up, bruck's ⌈log2 n⌉ steps beat the star's two at 2 and 4 ranks and
// lost from 8 (16 ranks: 2.6 ms against 2.1, 32: 7.1 against 4.7;
// docs/benchmarks.md). Every rank must choose alike, so the rule is on
// what all know, the size, not on whether this host spins.
const bruckRanks = 4

// gathered reports whether a call of b bytes per rank runs by bruck.
func (c *Comm) gathered(b int) bool {
	return c.size > 1 && c.size <= bruckRanks && c.size*b <= bruckMax
}

// bruckReduce gathers every rank's data by bruck and folds it in rank
// order: every rank returns the same new bytes.
func (cc *collCall) bruckReduce(typ Type, op Op, data []byte) ([]byte, error) {
	blocks, err := cc.bruck(data)
	if err != nil {
		return nil, err
	}
	return reduceAll(typ, op, blocks)
}
