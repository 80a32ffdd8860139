package sched

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
// from any peer in one call. Every block has the call's length, which
// takeChunk checks.
//
// It returns the blocks by rank. The reductions fold them in rank order on
// every rank, so every rank computes the same bytes the star's root would.
func bruck(l Link, data []byte) ([][]byte, error) {
	n, me, b := l.Size(), l.Rank(), len(data)
	// held[j*b:] is the block of rank (me+j) mod n. Its capacity is the
	// whole, so appending never moves what a frame sent still aliases.
	held := make([]byte, b, n*b)
	copy(held, data)
	for d := 1; d < n; d *= 2 {
		l.Partners((me-d+n)%n, (me+d)%n)
	}
	for d := 1; d < n; d *= 2 {
		cnt := min(d, n-d)
		if err := l.Send((me-d+n)%n, false, held[:cnt*b]); err != nil {
			return nil, err
		}
		f, err := takeChunk(l, (me+d)%n, false, cnt*b)
		if err != nil {
			return nil, err
		}
		held = append(held, f.Data...)
		l.Release(f)
	}
	out := make([][]byte, n)
	for j := range n {
		out[(me+j)%n] = held[j*b : (j+1)*b]
	}
	return out, nil
}

func bruckAllgather(l Link, c Call) ([]byte, error) {
	blocks, err := bruck(l, c.Data)
	if err != nil {
		return nil, err
	}
	return concat(blocks), nil
}

// bruckAllreduce gathers every rank's data by bruck and folds it in rank
// order: every rank returns the same new bytes.
func bruckAllreduce(l Link, c Call) ([]byte, error) {
	blocks, err := bruck(l, c.Data)
	if err != nil {
		return nil, err
	}
	return foldAll(c.Fold, blocks), nil
}

// bruckReduce is bruckAllreduce whose fold only the root keeps, so only
// the root folds.
func bruckReduce(l Link, c Call) ([]byte, error) {
	blocks, err := bruck(l, c.Data)
	if err != nil || l.Rank() != c.Root {
		return nil, err
	}
	return foldAll(c.Fold, blocks), nil
}

// bruckReduceScatter is bruckAllreduce cut to this rank's block.
func bruckReduceScatter(l Link, c Call) ([]byte, error) {
	out, err := bruckAllreduce(l, c)
	if err != nil {
		return nil, err
	}
	b := len(c.Data) / l.Size()
	return append([]byte{}, out[l.Rank()*b:(l.Rank()+1)*b]...), nil
}

// bruckAlltoall is the alltoall of Bruck et al. (their "index"
// algorithm) for small blocks on many ranks: ⌈log2 n⌉ partners a rank
// where the pairwise exchange has n−1, so an alltoall on a thousand ranks
// opens about twenty links a rank, not a thousand (SPEC §18), at the cost
// of sending about half the data in each of its ⌈log2 n⌉ rounds.
//
// The block of offset j (0 ≤ j < n) is the one that must go j ranks on.
// At first this rank holds, at offset j, its own block for rank me+j. In
// the round of distance d (1, 2, 4, …) every block whose offset has the
// bit d goes d ranks on: this rank sends rank me+d those blocks in offset
// order and takes from rank me−d the blocks of the same offsets, which
// replace them. A block of offset j has then gone the sum of j's bits,
// j ranks, so at the end this rank holds at offset j the block rank me−j
// sent it. Every block has the call's block length, which takeChunk checks
// (as a count of blocks); the distances are all below n, so a rank takes
// at most one frame from any peer in one call, and every rank's result
// depends on a frame from every rank, directly or through others.
func bruckAlltoall(l Link, c Call) ([]byte, error) {
	n, me, data := l.Size(), l.Rank(), c.Data
	b := len(data) / n
	held := make([]byte, n*b)
	for j := range n {
		to := (me + j) % n
		copy(held[j*b:(j+1)*b], data[to*b:(to+1)*b])
	}
	for d := 1; d < n; d *= 2 {
		l.Partners((me+d)%n, (me-d+n)%n)
	}
	for d := 1; d < n; d *= 2 {
		// The offsets with the bit d are runs of d: [d, 2d), [3d, 4d), …
		// Each round's frame is a new slice: Send does not copy, and held
		// changes in the next rounds.
		out := make([]byte, 0, (n/2+d)*b)
		for lo := d; lo < n; lo += 2 * d {
			out = append(out, held[lo*b:min(lo+d, n)*b]...)
		}
		if err := l.Send((me+d)%n, false, out); err != nil {
			return nil, err
		}
		f, err := takeChunk(l, (me-d+n)%n, false, len(out))
		if err != nil {
			return nil, err
		}
		k := 0
		for lo := d; lo < n; lo += 2 * d {
			k += copy(held[lo*b:min(lo+d, n)*b], f.Data[k:])
		}
		l.Release(f)
	}
	res := make([]byte, n*b)
	for j := range n {
		from := (me - j + n) % n
		copy(res[from*b:(from+1)*b], held[j*b:(j+1)*b])
	}
	return res, nil
}
