package runtime

// allgatherRing is the ring allgather: rank i sends its block to i+1, then
// n−2 times passes on the block it took from i−1, each block in chunks.
// Every rank takes every other rank's block: n−1 steps, each rank sends
// (n−1)/n of the result once.
func (cc *collCall) allgatherRing(data []byte) ([]byte, error) {
	c := cc.c
	n, me, b := c.size, c.rank, len(data)
	out := make([]byte, n*b)
	copy(out[me*b:], data)
	next, prev := (me+1)%n, (me-1+n)%n
	for _, ch := range chunks(b) {
		if err := cc.send(next, 0, data[ch[0]:ch[1]]); err != nil {
			return nil, err
		}
	}
	for s := 1; s < n; s++ {
		blk := out[((me-s+n)%n)*b:][:b]
		for _, ch := range chunks(b) {
			f, err := cc.takeChunk(prev, false, ch[1]-ch[0])
			if err != nil {
				return nil, err
			}
			copy(blk[ch[0]:ch[1]], f.data)
			putBuf(f.buf)
			if s < n-1 {
				if err := cc.send(next, 0, blk[ch[0]:ch[1]]); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}
