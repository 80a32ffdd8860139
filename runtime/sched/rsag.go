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
func foldBlocks(l Link, fold Fold, data []byte) ([]byte, error) {
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
	}
	return res, nil
}

// allreduceBlocks is foldBlocks, then every rank's block to every rank.
func allreduceBlocks(l Link, c Call) ([]byte, error) {
	data := c.Data
	res, err := foldBlocks(l, c.Fold, data)
	if err != nil {
		return nil, err
	}
	n, me, e := l.Size(), l.Rank(), c.Fold.Elem()
	lo, hi := block(len(data), e, n, me)
	for s := 1; s < n; s++ {
		for _, ch := range chunks(hi - lo) {
			if err := l.Send((me+s)%n, true, res[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
	}
	for s := 1; s < n; s++ {
		from := (me - s + n) % n
		lo, hi := block(len(data), e, n, from)
		if err := takeInto(l, from, res[lo:hi]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reduceBlocks is foldBlocks, then every block to the root.
func reduceBlocks(l Link, c Call) ([]byte, error) {
	data, root := c.Data, c.Root
	res, err := foldBlocks(l, c.Fold, data)
	if err != nil {
		return nil, err
	}
	n, me, e := l.Size(), l.Rank(), c.Fold.Elem()
	if me != root {
		lo, hi := block(len(data), e, n, me)
		for _, ch := range chunks(hi - lo) {
			if err := l.Send(root, true, res[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
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
	res, err := foldBlocks(l, c.Fold, c.Data)
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
