package runtime

// dissemination is the barrier of Hensgen, Finkel and Manber: in round r
// (r = 0 … ⌈log2 n⌉−1) rank i sends a frame to rank (i + 2^r) mod n and
// takes one from rank (i − 2^r) mod n. After the last round every rank has
// heard, directly or through others, from every rank: ⌈log2 n⌉ steps of
// latency, no rank busier than another. The distances 2^r are all below n,
// so a rank takes at most one frame from any peer in one call.
func (cc *collCall) dissemination() error {
	c := cc.c
	n, me := c.size, c.rank
	for d := 1; d < n; d *= 2 {
		if err := cc.send((me+d)%n, 0, nil); err != nil {
			return err
		}
		if _, err := cc.take((me - d + n) % n); err != nil {
			return err
		}
	}
	return nil
}
