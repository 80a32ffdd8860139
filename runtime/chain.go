package runtime

import "sperli/wire"

// The pipelined chain of a large bcast: data flows from the root through
// the ranks in a line, cut into chunks, so that every rank works at once
// and no rank sends more than the data once, whatever the rank count.
// (Reductions went down the same chain in rank order until the block
// schedules of rsag.go replaced it: they send less per rank and fold on
// every rank at once.)

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
