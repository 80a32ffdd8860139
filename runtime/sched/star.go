package sched

import "bytes"

// Star is the star schedule around root (docs/protocol.md §8.5): the root
// announces the call to every other rank (so that two ranks that both
// think they are the root find out), every other rank sends the root its
// contribution (a descriptor, plus data where the call gathers it), the
// root checks every contribution, computes with finish, and sends each
// rank its result with the ack flag. No rank returns before the root has
// seen every contribution. Two steps of latency whatever the size: the
// schedule of small calls.
//
// finish gets the contributions by rank (this rank's is contribute) and
// returns the root's own result and out[r], rank r's (out nil: empty
// results); an error of finish is returned as it is. Off the root Star
// returns the Data of the root's result frame.
func Star(l Link, root int, contribute []byte, finish func(contrib [][]byte) (own []byte, out [][]byte, err error)) ([]byte, error) {
	size, me := l.Size(), l.Rank()
	if size == 1 {
		own, _, err := finish([][]byte{contribute})
		if err != nil {
			return nil, err
		}
		return own, nil
	}
	if me != root {
		if err := l.Send(root, false, contribute); err != nil {
			return nil, err
		}
		for {
			f, err := l.Take(root)
			if err != nil {
				return nil, err
			}
			if f.Ack {
				return f.Data, nil
			}
			// The root's announcement; its descriptor was checked by Take.
			l.Release(f)
		}
	}
	for r := 0; r < size; r++ {
		if r != me {
			if err := l.Send(r, false, nil); err != nil {
				return nil, err
			}
		}
	}
	contrib := make([][]byte, size)
	contrib[me] = contribute
	for r := 0; r < size; r++ {
		if r == me {
			continue
		}
		f, err := l.Take(r)
		if err != nil {
			return nil, err
		}
		if f.Ack {
			return nil, l.Mismatch("collective mismatch in call %d: rank %d sent a result of %s, which has root %d", l.Seq(), r, l.Describe(), root)
		}
		if f.Len != len(f.Data) {
			return nil, l.Mismatch("collective frame of call %d from rank %d says %d bytes and carries %d", l.Seq(), r, f.Len, len(f.Data))
		}
		contrib[r] = f.Data
	}
	own, out, err := finish(contrib)
	if err != nil {
		return nil, err
	}
	for r := 0; r < size; r++ {
		if r != me {
			var d []byte
			if out != nil {
				d = out[r]
			}
			if err := l.Send(r, true, d); err != nil {
				return nil, err
			}
		}
	}
	return own, nil
}

// The star's lines of the table: what the root computes for each kind.

func starBarrier(l Link, c Call) ([]byte, error) {
	return Star(l, c.Root, nil, func([][]byte) ([]byte, [][]byte, error) { return nil, nil, nil })
}

func bcastStar(l Link, c Call) ([]byte, error) {
	if l.Rank() != c.Root {
		// Run took the announcement: the result follows.
		f, err := takeChunk(l, c.Root, true, c.n)
		if err != nil {
			return nil, err
		}
		return f.Data, nil
	}
	return Star(l, c.Root, nil, func([][]byte) ([]byte, [][]byte, error) {
		return append([]byte{}, c.Data...), same(l.Size(), c.Data), nil
	})
}

func starReduce(l Link, c Call) ([]byte, error) {
	return Star(l, c.Root, c.Data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out, err := foldChecked(l, c.Fold, contrib)
		return out, nil, err
	})
}

func starAllreduce(l Link, c Call) ([]byte, error) {
	return Star(l, c.Root, c.Data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out, err := foldChecked(l, c.Fold, contrib)
		if err != nil {
			return nil, nil, err
		}
		return out, same(len(contrib), out), nil
	})
}

func starReduceScatter(l Link, c Call) ([]byte, error) {
	size := l.Size()
	b := len(c.Data) / size
	return Star(l, c.Root, c.Data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out, err := foldChecked(l, c.Fold, contrib)
		if err != nil {
			return nil, nil, err
		}
		blocks := make([][]byte, size)
		for i := range blocks {
			blocks[i] = out[i*b : (i+1)*b]
		}
		return append([]byte{}, blocks[l.Rank()]...), blocks, nil
	})
}

func starAllgather(l Link, c Call) ([]byte, error) {
	return Star(l, c.Root, c.Data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out := concat(contrib)
		return append([]byte{}, out...), same(len(contrib), out), nil
	})
}

func starGather(l Link, c Call) ([]byte, error) {
	return Star(l, c.Root, c.Data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		if err := sameLengths(l, "gather", contrib); err != nil {
			return nil, nil, err
		}
		return concat(contrib), nil, nil
	})
}

func starScatter(l Link, c Call) ([]byte, error) {
	size := l.Size()
	return Star(l, c.Root, nil, func([][]byte) ([]byte, [][]byte, error) {
		if len(c.Data)%size != 0 {
			return nil, nil, l.Mismatch("scatter: %d bytes are no whole number of %d blocks", len(c.Data), size)
		}
		n := len(c.Data) / size
		out := make([][]byte, size)
		for i := range out {
			out[i] = c.Data[i*n : (i+1)*n]
		}
		return append([]byte{}, out[l.Rank()]...), out, nil
	})
}

// same is n times b.
func same(n int, b []byte) [][]byte {
	all := make([][]byte, n)
	for i := range all {
		all[i] = b
	}
	return all
}

// concat is the blocks one after the other, in new bytes.
func concat(blocks [][]byte) []byte {
	return bytes.Join(blocks, nil)
}

// sameLengths checks the star's contributions have one length (H1613).
func sameLengths(l Link, op string, contrib [][]byte) error {
	for r, d := range contrib {
		if len(d) != len(contrib[0]) {
			return l.Mismatch("%s: contributions of different lengths: rank %d gave %d bytes, rank 0 gave %d", op, r, len(d), len(contrib[0]))
		}
	}
	return nil
}
