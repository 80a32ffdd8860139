package sched

// The pipelined chain of a large bcast: data flows from the root through
// the ranks in a line, cut into chunks, so that every rank works at once
// and no rank sends more than the data once, whatever the rank count.
// (Reductions went down the same chain in rank order until the block
// schedules of rsag.go replaced it: they send less per rank and fold on
// every rank at once.)

// bcastChain is the large bcast's line of the table: off the root, Run
// has taken the announcement, which said c.n bytes.
func bcastChain(l Link, c Call) ([]byte, error) {
	if l.Rank() == c.Root {
		return bcastChainRoot(l, c.Data)
	}
	return bcastChainFollow(l, c.Root, c.n)
}

// passBack takes n bytes of result from rank from, chunk by chunk, into a
// new buffer and passes each chunk on to rank to (none when to < 0).
func passBack(l Link, from, to, n int) ([]byte, error) {
	res := make([]byte, n)
	for _, ch := range chunks(n) {
		f, err := takeChunk(l, from, true, ch[1]-ch[0])
		if err != nil {
			return nil, err
		}
		copy(res[ch[0]:ch[1]], f.Data)
		l.Release(f)
		if to >= 0 {
			if err := l.Send(to, true, res[ch[0]:ch[1]]); err != nil {
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
func bcastChainRoot(l Link, data []byte) ([]byte, error) {
	size, me := l.Size(), l.Rank()
	for r := 0; r < size; r++ {
		if r != me {
			if err := l.Send(r, false, nil); err != nil {
				return nil, err
			}
		}
	}
	for r := 0; r < size; r++ {
		if r == me {
			continue
		}
		f, err := l.Take(r)
		if err != nil {
			return nil, err
		}
		if f.Ack || len(f.Data) != 0 {
			return nil, l.Mismatch("collective mismatch in call %d: rank %d sent %d bytes to the root of a bcast", l.Seq(), r, len(f.Data))
		}
		l.Release(f)
	}
	next := (me + 1) % size
	for _, ch := range chunks(len(data)) {
		if err := l.Send(next, true, data[ch[0]:ch[1]]); err != nil {
			return nil, err
		}
	}
	return append([]byte{}, data...), nil
}

// bcastChainFollow is every other rank's side, once the root's
// announcement said n bytes: take them from the previous rank of the
// chain, pass them to the next.
func bcastChainFollow(l Link, root, n int) ([]byte, error) {
	size, me := l.Size(), l.Rank()
	prev, next := (me-1+size)%size, (me+1)%size
	if next == root {
		next = -1
	}
	return passBack(l, prev, next, n)
}
