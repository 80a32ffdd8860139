package sched

// The large reductions on treeMin ranks or more. The blocks (rsag.go)
// make every rank a partner of every other, and gathering chainMin bytes
// a rank to one rank over the tree is up to 16 GiB at 1,024 ranks, so the
// fold goes down the chain 0 → 1 → … → n−1 in chunks: rank i takes the
// fold of ranks 0 … i−1, folds its own data into it and passes it on,
// which is the rank-order fold ((r0 ∘ r1) ∘ r2) … exactly, floats
// included, with every rank folding a chunk at once. The last rank then
// has the result, which depends on every rank's data; it spreads over the
// tree from there (tree.go, flowFrom): up the tree's right edge and down
// every subtree, each rank taking it once. A rank's partners are its two
// neighbours on the chain and its tree neighbours; rank i+1 is rank i's
// first kid where it has kids, so at most topo.Radix+2 (10).

// foldChain folds down the chain and returns this rank's fold of ranks
// 0 … me: at the last rank, the result. It begins with the tree's up
// half, a frame from each kid and then one to the parent, as every line
// of the tree does: a rank whose data is under chainMin while this one's
// is not (its call runs by the tree) then meets this one's frame where it
// waits for it, and the mismatch is seen, where down the chain each would
// wait for a frame the other never sends.
func foldChain(l Link, t tree, c Call) ([]byte, error) {
	l.Partners(l.Rank()-1, l.Rank()+1)
	for _, k := range t.kids {
		f, err := takeData(l, k, c.Kind, len(c.Data), 0)
		if err != nil {
			return nil, err
		}
		l.Release(f)
	}
	if t.parent >= 0 {
		if err := l.Send(t.parent, false, nil); err != nil {
			return nil, err
		}
	}
	n, me, e := l.Size(), l.Rank(), c.Fold.Elem()
	acc := AlignedBytes(len(c.Data))
	var scratch []byte
	for _, ch := range chunks(len(c.Data)) {
		a, x := acc[ch[0]:ch[1]], c.Data[ch[0]:ch[1]]
		if me == 0 {
			c.Fold.First(a, x)
		} else {
			f, err := takeData(l, me-1, c.Kind, len(c.Data), len(a))
			if err != nil {
				return nil, err
			}
			copy(a, f.Data)
			l.Release(f)
			if !Aligned(x, e) {
				if scratch == nil {
					scratch = AlignedBytes(chunk)
				}
				x = scratch[:copy(scratch, x)]
			}
			c.Fold.Next(a, x)
		}
		if me < n-1 {
			if err := l.Send(me+1, false, a); err != nil {
				return nil, err
			}
		}
	}
	return acc, nil
}

func chainAllreduce(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	acc, err := foldChain(l, t, c)
	if err != nil {
		return nil, err
	}
	return spread(l, t.flowFrom(l.Size()-1), acc, whole(len(c.Data)))
}

func chainReduce(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	acc, err := foldChain(l, t, c)
	if err != nil {
		return nil, err
	}
	res, err := spread(l, t.flowFrom(l.Size()-1), acc, toward(c.Root, len(c.Data)))
	if err != nil || l.Rank() != c.Root {
		return nil, err
	}
	return res, nil
}

func chainReduceScatter(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	acc, err := foldChain(l, t, c)
	if err != nil {
		return nil, err
	}
	return ownBlock(l, t.flowFrom(l.Size()-1), acc, len(c.Data)/l.Size())
}
