package runtime

import "sperli/wire"

// The pipelined chain: data flows through the ranks in a line, cut into
// chunks, so that every rank works at once and no rank sends more than
// twice the data, whatever the rank count (ring-like bandwidth). In rank
// order 0 → 1 → … → n−1 it folds reductions in exactly the order of the
// rank-order rule, floats included.

// chunks cuts n bytes into the pipeline's chunks: [lo, hi) pairs, one
// empty chunk for no data.
func chunks(n int) [][2]int {
	if n == 0 {
		return [][2]int{{0, 0}}
	}
	out := make([][2]int, 0, (n+chunk-1)/chunk)
	for lo := 0; lo < n; lo += chunk {
		out = append(out, [2]int{lo, min(lo+chunk, n)})
	}
	return out
}

// takeChunk takes the next frame from rank from and checks it is a frame
// of want bytes with the ack flag (a result) or without (data going on).
// The caller copies f.data out and then may putBuf(f.buf).
func (cc *collCall) takeChunk(from int, ack bool, want int) (collFrame, error) {
	f, err := cc.take(from)
	if err != nil {
		return f, err
	}
	if (f.flags&wire.FlagAck != 0) != ack || len(f.data) != want {
		return f, cc.c.mismatch("collective mismatch in call %d: rank %d sent a frame of %d bytes (ack %v) where this rank's schedule takes %d (ack %v)", cc.k, from, len(f.data), f.flags&wire.FlagAck != 0, want, ack)
	}
	return f, nil
}

// foldChain reduces data over every rank in rank order by the forward
// chain and returns the full result on rank n−1 (nil elsewhere): rank i
// takes the fold of ranks 0 … i−1 chunk by chunk from rank i−1, folds its
// own chunk in, and passes it on.
func (cc *collCall) foldChain(typ Type, op Op, data []byte) ([]byte, error) {
	c := cc.c
	n, me := c.size, c.rank
	logical := op == Land || op == Lor || op == Lxor
	var acc, scratch []byte
	if me > 0 || logical {
		acc = alignedBytes(len(data))
	}
	for _, ch := range chunks(len(data)) {
		part := data[ch[0]:ch[1]]
		if me == 0 {
			if logical {
				copy(acc[ch[0]:ch[1]], part)
				normalise(typ, acc[ch[0]:ch[1]])
				part = acc[ch[0]:ch[1]]
			}
		} else {
			f, err := cc.takeChunk(me-1, false, len(part))
			if err != nil {
				return nil, err
			}
			a := acc[ch[0]:ch[1]]
			copy(a, f.data)
			putBuf(f.buf)
			x := part
			if !aligned(x, typ.Size()) {
				if scratch == nil {
					scratch = alignedBytes(chunk)
				}
				x = scratch[:copy(scratch, x)]
			}
			Combine(typ, op, a, x)
			part = a
		}
		if me < n-1 {
			if err := cc.send(me+1, 0, part); err != nil {
				return nil, err
			}
		}
	}
	if me == n-1 {
		return acc, nil
	}
	return nil, nil
}

// passBack takes n bytes of result from rank from, chunk by chunk, into a
// new buffer and passes each chunk on to rank to (none when to < 0).
func (cc *collCall) passBack(from, to, n int) ([]byte, error) {
	res := make([]byte, n)
	for _, ch := range chunks(n) {
		f, err := cc.takeChunk(from, true, ch[1]-ch[0])
		if err != nil {
			return nil, err
		}
		copy(res[ch[0]:ch[1]], f.data)
		putBuf(f.buf)
		if to >= 0 {
			if err := cc.send(to, wire.FlagAck, res[ch[0]:ch[1]]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// allreduceChain is the forward chain, then the result back along it
// (n−1 → … → 0), pipelined too: rank i passes each result chunk to i−1 as
// it comes. Every rank returns the same new bytes, and each rank's result
// came through rank n−1 after it had every rank's data.
func (cc *collCall) allreduceChain(typ Type, op Op, data []byte) ([]byte, error) {
	c := cc.c
	me := c.rank
	res, err := cc.foldChain(typ, op, data)
	if err != nil {
		return nil, err
	}
	if me == c.size-1 {
		for _, ch := range chunks(len(res)) {
			if err := cc.send(me-1, wire.FlagAck, res[ch[0]:ch[1]]); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	return cc.passBack(me+1, me-1, len(data))
}

// reduceChain is the forward chain; rank n−1 then sends the result to the
// root (when it is another rank) and a done frame to every other rank, so
// that no rank returns before the last has every rank's data.
func (cc *collCall) reduceChain(typ Type, op Op, root int, data []byte) ([]byte, error) {
	return cc.foldThenDeal(typ, op, data, func(r int, res []byte) []byte {
		if r == root {
			return res
		}
		return nil
	})
}

// reduceScatterChain is the forward chain; rank n−1 then sends block i of
// the result to rank i.
func (cc *collCall) reduceScatterChain(typ Type, op Op, data []byte) ([]byte, error) {
	b := len(data) / cc.c.size
	res, err := cc.foldThenDeal(typ, op, data, func(r int, res []byte) []byte { return res[r*b : (r+1)*b] })
	if err != nil {
		return nil, err
	}
	return append([]byte{}, res...), nil
}

// foldThenDeal folds by the forward chain; rank n−1 sends rank r the part
// deal(r, result) picks (empty for none), and returns its own part.
func (cc *collCall) foldThenDeal(typ Type, op Op, data []byte, deal func(r int, res []byte) []byte) ([]byte, error) {
	c := cc.c
	last := c.size - 1
	res, err := cc.foldChain(typ, op, data)
	if err != nil {
		return nil, err
	}
	if c.rank == last {
		for r := 0; r < last; r++ {
			if err := cc.send(r, wire.FlagAck, deal(r, res)); err != nil {
				return nil, err
			}
		}
		return deal(last, res), nil
	}
	// Only the length of the part is known here: deal it from a result of
	// the right size that is never read.
	want := len(deal(c.rank, make([]byte, len(data))))
	f, err := cc.takeChunk(last, true, want)
	if err != nil {
		return nil, err
	}
	return f.data, nil
}

// bcastChainRoot is the root's side of the large bcast: the star's first
// step (announce the call, with the data's length; take every rank's
// descriptor: no rank returns before every rank has taken the call), then
// the data down the chain root → root+1 → … (mod n) in chunks.
func (cc *collCall) bcastChainRoot(data []byte) ([]byte, error) {
	c := cc.c
	for r := 0; r < c.size; r++ {
		if r != c.rank {
			if err := cc.send(r, 0, nil); err != nil {
				return nil, err
			}
		}
	}
	for r := 0; r < c.size; r++ {
		if r == c.rank {
			continue
		}
		f, err := cc.take(r)
		if err != nil {
			return nil, err
		}
		if f.flags&wire.FlagAck != 0 || len(f.data) != 0 {
			return nil, c.mismatch("collective mismatch in call %d: rank %d sent %d bytes to the root of a bcast", cc.k, r, len(f.data))
		}
	}
	next := (c.rank + 1) % c.size
	for _, ch := range chunks(len(data)) {
		if err := cc.send(next, wire.FlagAck, data[ch[0]:ch[1]]); err != nil {
			return nil, err
		}
	}
	return append([]byte{}, data...), nil
}

// bcastChainFollow is every other rank's side, once the root's
// announcement said n bytes: take them from the previous rank of the
// chain, pass them to the next.
func (cc *collCall) bcastChainFollow(root, n int) ([]byte, error) {
	c := cc.c
	size := c.size
	prev, next := (c.rank-1+size)%size, (c.rank+1)%size
	if next == root {
		next = -1
	}
	return cc.passBack(prev, next, n)
}
