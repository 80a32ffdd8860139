package runtime

import "sperli/wire"

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
func (cc *collCall) foldBlocks(typ Type, op Op, data []byte) ([]byte, error) {
	c := cc.c
	n, me, e := c.size, c.rank, typ.Size()
	for s := 1; s < n; s++ {
		j := (me + s) % n
		lo, hi := block(len(data), e, n, j)
		for _, ch := range chunks(hi - lo) {
			if err := cc.send(j, 0, data[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
	}
	res := alignedBytes(len(data))
	lo, hi := block(len(data), e, n, me)
	logical := op == Land || op == Lor || op == Lxor
	var scratch []byte
	for _, ch := range chunks(hi - lo) {
		acc := res[lo+ch[0] : lo+ch[1]]
		for r := range n {
			x, buf := data[lo+ch[0]:lo+ch[1]], []byte(nil)
			if r != me {
				f, err := cc.takeChunk(r, false, len(acc))
				if err != nil {
					return nil, err
				}
				x, buf = f.data, f.buf
			}
			if r == 0 {
				copy(acc, x)
				if logical {
					normalise(typ, acc)
				}
			} else {
				if !aligned(x, e) {
					if scratch == nil {
						scratch = alignedBytes(chunk)
					}
					x = scratch[:copy(scratch, x)]
				}
				Combine(typ, op, acc, x)
			}
			putBuf(buf)
		}
	}
	return res, nil
}

// allreduceBlocks is foldBlocks, then every rank's block to every rank.
func (cc *collCall) allreduceBlocks(typ Type, op Op, data []byte) ([]byte, error) {
	res, err := cc.foldBlocks(typ, op, data)
	if err != nil {
		return nil, err
	}
	c := cc.c
	n, me, e := c.size, c.rank, typ.Size()
	lo, hi := block(len(data), e, n, me)
	for s := 1; s < n; s++ {
		for _, ch := range chunks(hi - lo) {
			if err := cc.send((me+s)%n, wire.FlagAck, res[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
	}
	for s := 1; s < n; s++ {
		from := (me - s + n) % n
		lo, hi := block(len(data), e, n, from)
		if err := cc.takeInto(from, res[lo:hi]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// reduceBlocks is foldBlocks, then every block to the root.
func (cc *collCall) reduceBlocks(typ Type, op Op, root int, data []byte) ([]byte, error) {
	res, err := cc.foldBlocks(typ, op, data)
	if err != nil {
		return nil, err
	}
	c := cc.c
	n, me, e := c.size, c.rank, typ.Size()
	if me != root {
		lo, hi := block(len(data), e, n, me)
		for _, ch := range chunks(hi - lo) {
			if err := cc.send(root, wire.FlagAck, res[lo+ch[0]:lo+ch[1]]); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	for r := range n {
		if r != me {
			lo, hi := block(len(data), e, n, r)
			if err := cc.takeInto(r, res[lo:hi]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// reduceScatterBlocks is foldBlocks alone: this rank's block is its part
// (ReduceScatter's blocks are equal, as block cuts them then).
func (cc *collCall) reduceScatterBlocks(typ Type, op Op, data []byte) ([]byte, error) {
	res, err := cc.foldBlocks(typ, op, data)
	if err != nil {
		return nil, err
	}
	lo, hi := block(len(data), typ.Size(), cc.c.size, cc.c.rank)
	return append([]byte{}, res[lo:hi]...), nil
}

// takeInto takes result chunks (ack) from rank from into dst.
func (cc *collCall) takeInto(from int, dst []byte) error {
	for _, ch := range chunks(len(dst)) {
		f, err := cc.takeChunk(from, true, ch[1]-ch[0])
		if err != nil {
			return err
		}
		copy(dst[ch[0]:ch[1]], f.data)
		putBuf(f.buf)
	}
	return nil
}
