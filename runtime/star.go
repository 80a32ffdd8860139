package runtime

import "sperli/wire"

// star is the star schedule around the call's root (docs/protocol.md §8.5):
// the root announces the call to every other rank (so that two ranks that
// both think they are the root find out), every other rank sends the root
// its contribution (a descriptor, plus data where the call gathers it), the
// root checks every contribution, computes with finishRoot, and sends each
// rank its result with the ack flag. No rank returns before the root has
// seen every contribution. Two steps of latency whatever the size: the
// schedule of small calls.
func (cc *collCall) star(contribute []byte, finishRoot func(contrib [][]byte) (own []byte, out [][]byte, err error)) ([]byte, error) {
	c, mine, k := cc.c, cc.mine, cc.k
	kind := Kind(mine.Kind)
	root := int(mine.Root)
	if c.size == 1 {
		own, _, err := finishRoot([][]byte{contribute})
		if err != nil {
			return nil, c.rootFailed(err)
		}
		return own, nil
	}
	if c.rank != root {
		if err := cc.send(root, 0, contribute); err != nil {
			return nil, err
		}
		for {
			f, err := cc.take(root)
			if err != nil {
				return nil, err
			}
			if f.flags&wire.FlagAck != 0 {
				return f.data, nil
			}
			// The root's announcement; its descriptor was checked by take.
		}
	}
	for r := 0; r < c.size; r++ {
		if r != c.rank {
			if err := cc.send(r, 0, nil); err != nil {
				return nil, err
			}
		}
	}
	contrib := make([][]byte, c.size)
	contrib[c.rank] = contribute
	for r := 0; r < c.size; r++ {
		if r == c.rank {
			continue
		}
		f, err := cc.take(r)
		if err != nil {
			return nil, err
		}
		if f.flags&wire.FlagAck != 0 {
			return nil, c.mismatch("collective mismatch in call %d: rank %d sent a result of %s, which has root %d", k, r, describe(kind, mine), root)
		}
		if int(f.call.Length) != len(f.data) {
			return nil, c.mismatch("collective frame of call %d from rank %d says %d bytes and carries %d", k, r, f.call.Length, len(f.data))
		}
		contrib[r] = f.data
	}
	own, out, err := finishRoot(contrib)
	if err != nil {
		return nil, c.rootFailed(err)
	}
	for r := 0; r < c.size; r++ {
		if r != c.rank {
			var d []byte
			if out != nil {
				d = out[r]
			}
			if err := cc.send(r, wire.FlagAck, d); err != nil {
				return nil, err
			}
		}
	}
	return own, nil
}
