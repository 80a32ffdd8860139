package sched

// allgatherRing is the ring allgather: rank i sends its block to i+1, then
// n−2 times passes on the block it took from i−1, each block in chunks.
// Every rank takes every other rank's block: n−1 steps, each rank sends
// (n−1)/n of the result once.
func allgatherRing(l Link, c Call) ([]byte, error) {
	n, me, data := l.Size(), l.Rank(), c.Data
	b := len(data)
	out := make([]byte, n*b)
	copy(out[me*b:], data)
	next, prev := (me+1)%n, (me-1+n)%n
	l.Partners(next, prev)
	for _, ch := range chunks(b) {
		if err := l.Send(next, false, data[ch[0]:ch[1]]); err != nil {
			return nil, err
		}
	}
	for s := 1; s < n; s++ {
		blk := out[((me-s+n)%n)*b:][:b]
		for _, ch := range chunks(b) {
			f, err := takeChunk(l, prev, false, ch[1]-ch[0])
			if err != nil {
				return nil, err
			}
			copy(blk[ch[0]:ch[1]], f.Data)
			l.Release(f)
			if s < n-1 {
				if err := l.Send(next, false, blk[ch[0]:ch[1]]); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
