package sched

// pairwise is the alltoall exchange: rank i sends block j to rank j for
// every j (in the order i+1, i+2, … so that no rank is everyone's first),
// then takes one block from every rank. Each rank's result holds a block of
// every rank's.
func pairwise(l Link, c Call) ([]byte, error) {
	n, me, data := l.Size(), l.Rank(), c.Data
	b := len(data) / n
	out := make([]byte, len(data))
	copy(out[me*b:], data[me*b:(me+1)*b])
	for s := 1; s < n; s++ {
		to := (me + s) % n
		if err := l.Send(to, false, data[to*b:(to+1)*b]); err != nil {
			return nil, err
		}
	}
	for s := 1; s < n; s++ {
		from := (me - s + n) % n
		f, err := takeChunk(l, from, false, b)
		if err != nil {
			return nil, err
		}
		copy(out[from*b:], f.Data)
		l.Release(f)
	}
	return out, nil
}
