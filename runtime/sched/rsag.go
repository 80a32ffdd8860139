package sched

// The reduce-scatter and allgather of large reductions (Rabenseifner's
// shape, with direct sends so that the fold keeps rank order): the data is
// cut into n blocks of whole elements, block j owned by rank j. Every rank
// sends block j of its data to rank j; the owner folds the n contributions
// of its block in rank order ((r0 ∘ r1) ∘ r2) …, chunk by chunk as they
// come, so each block is the bytes the sequential fold gives, floats
// included. An allreduce then sends each folded block to every rank. Each
// rank sends (n−1)/n of the data per phase, where the chain's middle ranks
// send all of it twice, and every rank folds and encrypts a block of its
// own at once (the chain folds in a line). Every rank's result depends on a
// frame from every rank (the first phase takes from all).

// block is block j of n of size bytes of e-byte elements: [lo, hi), every
// block within one element of the others.
func block(size, e, n, j int) (lo, hi int) {
	elems := size / e
	return elems * j / n * e, elems * (j + 1) / n * e
}

// foldBlocks is the first phase: it returns a new buffer of len(data)
// bytes that holds, at this rank's block, the fold of every rank's block.
// It calls folded with each chunk of that block, res[lo:hi], as soon as
// the chunk's fold is done (nothing writes to it again), so that the
// second phase sends it while the next chunks are taken and folded: the
// sealing of the results overlaps the opening and folding of the
// contributions instead of following all of them. folded may be nil.
func foldBlocks(l Link, fold Fold, data []byte, folded func(res []byte, lo, hi int) error) ([]byte, error) {
	n, me, e := l.Size(), l.Rank(), fold.Elem()
	for s := 1; s < n; s++ {
		j := (me + s) % n
		lo, hi := block(len(data), e, n, j)
		for _, ch := range chunks(hi - lo) {
			if err := l.Send(j, false, data[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
	}
	res := AlignedBytes(len(data))
	lo, hi := block(len(data), e, n, me)
	var scratch []byte
	for _, ch := range chunks(hi - lo) {
		acc := res[lo+ch[0] : lo+ch[1]]
		for r := range n {
			x := data[lo+ch[0] : lo+ch[1]]
			var f Frame
			if r != me {
				var err error
				if f, err = takeChunk(l, r, false, len(acc)); err != nil {
					return nil, err
				}
				x = f.Data
			}
			if r == 0 {
				fold.First(acc, x)
			} else {
				if !Aligned(x, e) {
					if scratch == nil {
						scratch = AlignedBytes(chunk)
					}
					x = scratch[:copy(scratch, x)]
				}
				fold.Next(acc, x)
			}
			if r != me {
				l.Release(f)
			}
		}
		if folded != nil {
			if err := folded(res, lo+ch[0], lo+ch[1]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// allreduceBlocks is foldBlocks, every folded chunk of this rank's block
// sent to every rank as it is done, then the other ranks' blocks taken.
// The frames a rank sends to another are the same, in the same order, as
// when the results went out after the whole fold: its contributions to
// that rank's block (all sent before it folds), then its block's chunks.
func allreduceBlocks(l Link, c Call) ([]byte, error) {
	data := c.Data
	n, me := l.Size(), l.Rank()
	res, err := foldBlocks(l, c.Fold, data, func(res []byte, lo, hi int) error {
		for s := 1; s < n; s++ {
			if err := l.Send((me+s)%n, true, res[lo:hi]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e := c.Fold.Elem()
	for s := 1; s < n; s++ {
		from := (me - s + n) % n
		lo, hi := block(len(data), e, n, from)
		if err := takeInto(l, from, res[lo:hi]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reduceBlocks is foldBlocks, every folded chunk sent to the root as it
// is done.
func reduceBlocks(l Link, c Call) ([]byte, error) {
	data, root := c.Data, c.Root
	n, me, e := l.Size(), l.Rank(), c.Fold.Elem()
	var toRoot func(res []byte, lo, hi int) error
	if me != root {
		toRoot = func(res []byte, lo, hi int) error { return l.Send(root, true, res[lo:hi]) }
	}
	res, err := foldBlocks(l, c.Fold, data, toRoot)
	if err != nil {
		return nil, err
	}
	if me != root {
		return nil, nil
	}
	for r := range n {
		if r != me {
			lo, hi := block(len(data), e, n, r)
			if err := takeInto(l, r, res[lo:hi]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// reduceScatterBlocks is foldBlocks alone: this rank's block is its part
// (ReduceScatter's blocks are equal, as block cuts them then).
func reduceScatterBlocks(l Link, c Call) ([]byte, error) {
	res, err := foldBlocks(l, c.Fold, c.Data, nil)
	if err != nil {
		return nil, err
	}
	lo, hi := block(len(c.Data), c.Fold.Elem(), l.Size(), l.Rank())
	return append([]byte{}, res[lo:hi]...), nil
}

// takeInto takes result chunks (ack) from rank from into dst.
func takeInto(l Link, from int, dst []byte) error {
	for _, ch := range chunks(len(dst)) {
		f, err := takeChunk(l, from, true, ch[1]-ch[0])
		if err != nil {
			return err
		}
		copy(dst[ch[0]:ch[1]], f.Data)
		l.Release(f)
	}
	return nil
}
