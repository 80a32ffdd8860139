package sched

// dissemination is the barrier of Hensgen, Finkel and Manber: in round r
// (r = 0 … ⌈log2 n⌉−1) rank i sends a frame to rank (i + 2^r) mod n and
// takes one from rank (i − 2^r) mod n. After the last round every rank has
// heard, directly or through others, from every rank: ⌈log2 n⌉ steps of
// latency, no rank busier than another. The distances 2^r are all below n,
// so a rank takes at most one frame from any peer in one call.
func dissemination(l Link, _ Call) ([]byte, error) {
	n, me := l.Size(), l.Rank()
	for d := 1; d < n; d *= 2 {
		if err := l.Send((me+d)%n, false, nil); err != nil {
			return nil, err
		}
		f, err := l.Take((me - d + n) % n)
		if err != nil {
			return nil, err
		}
		l.Release(f)
	}
	return nil, nil
}
