package sched

import (
	"sperli/topo"
	"sperli/wire"
)

// The tree schedules of calls on treeMin ranks or more (issue 21: a
// thousand ranks on one machine, links made the first time a schedule
// uses them). The star makes its root a partner of every rank and the
// blocks make every rank a partner of every other: at 1,024 ranks rank 0
// would open 1,023 connections, each a TLS handshake and two goroutines.
// Over the tree a rank's partners are its parent and its kids.
//
// The tree is the job's spanning tree of package topo: a range tree of
// radix topo.Radix (8) rooted at rank 0, in which a rank a heading the
// range [a, b) splits (a, b) into up to 8 consecutive parts, the first
// rank of each part its kid. Every subtree is a range of consecutive
// ranks, so data flowing up gathers in rank order, and at 1,024 ranks the
// tree is 4 levels deep with at most 9 partners a rank. A level costs a
// step (a wake-up of the ranks on it) and a parent's radix frames one
// after another. By the measurements behind bruckRanks a step costs what
// 20 to 45 frames do at 16 and 32 ranks, so at 1,024 ranks radix 16
// (3 levels) would save a few percent over 8 (3 × (20+16) = 108 against
// 4 × (20+8) = 112 frame times) and radix 4 would lose (5 × 24 = 120);
// that is within what such a model can tell, while 16 nearly doubles the
// partners (17 against 9). 8 is also topo's radix: a call on the job's
// communicator uses the links of the runtime's spanning tree and no other.
//
// Every tree schedule has two halves. Up: a rank takes from each kid, in
// rank order, and sends its parent; down: it takes from its parent, then
// sends each kid. The last frame a rank sends in each half goes after
// everything it takes in that half (outflow), so that it vouches for its
// subtree: rank 0 has heard from every rank before any rank hears back,
// which is the table's rule (a void or a mismatch reaches every rank
// before anyone returns).
//
// Every line of the table on treeMin ranks or more but two begins with
// that up half over the same tree, whatever the call's kind, root or
// length (the large reductions too, before their chain), and in it a rank
// waits for nothing but its kids' frames: so, from the leaves up, every
// parent takes a frame of each kid's call, and a rank that made another
// call or gave another root, type, op or length (runtime compares every
// frame's descriptor; a length mismatch can make ranks choose different
// lines) is seen by its parent or its kid, never waited for without end.
// The two others, the ring and pairwise, send before they take, and
// runtime compares every frame that comes while a rank waits, from
// whichever rank.
//
// Frames are cut into chunks, the last one shorter (maybe empty:
// streamChunks), so that a rank that does not know a length (off the root
// of a bcast or scatter) knows its end.
//
// Reductions fold at rank 0 alone, in rank order, from every rank's data
// gathered up the tree: a sub-range folded on the way would be
// (r3 ∘ r4) ∘ … where the rule wants ((… ∘ r2) ∘ r3) ∘ r4, and a float
// fold is not associative. A Fold does not say whether its ∘ is (whole
// numbers are), and below chainMin bytes a rank the gathered data is at
// most what the star's root takes. Large reductions fold down the chain
// instead (chainfold.go).

// treeMin is the rank count from which calls run over the tree (large
// reductions down the chain; alltoall stays pairwise and a large allgather
// on the ring, whose partners are all or two anyway). Below it every
// choice is the one measured before issue 21 (docs/benchmarks.md, 2 to 32
// ranks), where the star's root has at most 31 partners.
const treeMin = 33

// many: a call on treeMin ranks or more runs over the tree.
func many(size, _ int) bool { return size >= treeMin }

// manyLarge: a reduction of chainMin bytes a rank or more on treeMin
// ranks or more folds down the chain.
func manyLarge(size, n int) bool { return many(size, n) && n >= chainMin }

// tree is this rank's place in the tree of the call's ranks.
type tree struct {
	n, me  int
	parent int   // -1 at rank 0
	kids   []int // in rank order; kid i's subtree is [kids[i], end(i))
	hi     int   // this rank's subtree is [me, hi)
}

func newTree(l Link) tree {
	n, me := l.Size(), l.Rank()
	_, hi := topo.Range(n, me)
	t := tree{n: n, me: me, parent: topo.Parent(n, me), kids: topo.Children(n, me), hi: hi}
	l.Partners(t.parent)
	l.Partners(t.kids...)
	return t
}

// end is the end of kid i's subtree.
func (t tree) end(i int) int {
	if i+1 < len(t.kids) {
		return t.kids[i+1]
	}
	return t.hi
}

// holds reports whether rank r is in this rank's subtree.
func (t tree) holds(r int) bool { return t.me <= r && r < t.hi }

// via is the index of the kid whose subtree holds rank r, or -1.
func (t tree) via(r int) int {
	for i, k := range t.kids {
		if k <= r && r < t.end(i) {
			return i
		}
	}
	return -1
}

// streamChunks cuts n bytes into the tree's frames: whole chunks, then
// one shorter, maybe empty, so that the taker sees the end without
// knowing n.
func streamChunks(n int) [][2]int {
	out := make([][2]int, 0, n/chunk+1)
	lo := 0
	for ; n-lo >= chunk; lo += chunk {
		out = append(out, [2]int{lo, lo + chunk})
	}
	return append(out, [2]int{lo, n})
}

// outflow sends parts of a buffer that fills in order, each part to its
// rank in streamChunks, each chunk as soon as its bytes are in; the last
// chunk of a part only once the whole buffer is in, so that it vouches
// for everything the rank took before.
type outflow struct {
	l     Link
	ack   bool
	parts []outPart
}

type outPart struct {
	to, off int
	cks     [][2]int
	next    int // the next chunk to send
}

// add makes buf[off:off+n] a part for rank to.
func (o *outflow) add(to, off, n int) {
	o.parts = append(o.parts, outPart{to: to, off: off, cks: streamChunks(n)})
}

// fill sends what buf's first filled bytes allow; full says they are all.
func (o *outflow) fill(buf []byte, filled int, full bool) error {
	for i := range o.parts {
		p := &o.parts[i]
		for ; p.next < len(p.cks); p.next++ {
			ch := p.cks[p.next]
			if p.off+ch[1] > filled || p.next == len(p.cks)-1 && !full {
				break
			}
			if err := o.l.Send(p.to, o.ack, buf[p.off+ch[0]:p.off+ch[1]]); err != nil {
				return err
			}
		}
	}
	return nil
}

// gatherUp is the up half of the calls that gather data (b bytes a rank,
// every rank alike): a rank's own data, then its kids' subtrees' in rank
// order, to its parent. It returns its subtree's data in rank order,
// 8-byte aligned: at rank 0 every rank's.
func gatherUp(l Link, t tree, kind wire.CollKind, data []byte) ([]byte, error) {
	b := len(data)
	buf := AlignedBytes((t.hi - t.me) * b)
	copy(buf, data)
	up := outflow{l: l}
	if t.parent >= 0 {
		up.add(t.parent, 0, len(buf))
	}
	if err := up.fill(buf, b, false); err != nil {
		return nil, err
	}
	for i, k := range t.kids {
		lo, hi := (k-t.me)*b, (t.end(i)-t.me)*b
		for _, ch := range streamChunks(hi - lo) {
			f, err := takeData(l, k, kind, b, ch[1]-ch[0])
			if err != nil {
				return nil, err
			}
			copy(buf[lo+ch[0]:], f.Data)
			l.Release(f)
			if err := up.fill(buf, lo+ch[1], false); err != nil {
				return nil, err
			}
		}
	}
	return buf, up.fill(buf, len(buf), true)
}

// takeData takes a frame of a kid's data, want bytes, and checks its
// sender gave n bytes as this rank did (runtime checks the descriptors
// first; here the ranks that took the other's frames say it alike).
func takeData(l Link, from int, kind wire.CollKind, n, want int) (Frame, error) {
	f, err := l.Take(from)
	if err != nil {
		return f, err
	}
	if !f.Ack && f.Len != n {
		return f, l.Mismatch("%s: contributions of different lengths: rank %d gave %d bytes, rank %d gave %d", kind, from, f.Len, l.Rank(), n)
	}
	return f, checkChunk(l, from, f, false, want)
}

// flow is a rank's place in a spread from a source (rank 0, or the last
// rank where the chain ends): the rank it takes from (-1 at the source),
// the ranks it passes on to, and its span, the ranks reached through it
// from the source's side. Every span is a range of consecutive ranks:
// seen from the last rank, a rank of the tree's right edge (the ranks
// whose subtree holds the last) reaches [0, its last kid).
type flow struct {
	from   int
	lo, hi int
	outs   []span
}

type span struct{ rank, lo, hi int }

// flowFrom is this rank's flow from rank src, 0 or the last rank.
func (t tree) flowFrom(src int) flow {
	fl := flow{from: t.parent, lo: t.me, hi: t.hi}
	kids := len(t.kids)
	if src == t.n-1 && t.hi == t.n {
		fl.lo = 0
		if t.me == src {
			fl.from, fl.hi = -1, t.n
		} else {
			kids--
			fl.from, fl.hi = t.kids[kids], t.kids[kids]
		}
		if t.parent >= 0 {
			fl.outs = append(fl.outs, span{t.parent, 0, t.me})
		}
	}
	for i := range kids {
		fl.outs = append(fl.outs, span{t.kids[i], t.kids[i], t.end(i)})
	}
	return fl
}

// A spreadPart says which bytes of a rank's own a rank of span [lo, hi)
// gets: off and n into them.
type spreadPart func(lo, hi int) (off, n int)

// whole: every rank gets all n bytes.
func whole(n int) spreadPart { return func(int, int) (int, int) { return 0, n } }

// toward: the n bytes go to the spans that hold root; the others get none
// (an empty frame that says the call is complete).
func toward(root, n int) spreadPart {
	return func(lo, hi int) (int, int) {
		if lo <= root && root < hi {
			return 0, n
		}
		return 0, 0
	}
}

// blocks: a span gets its ranks' blocks of b bytes, of a rank's own that
// start at block from.
func blocks(from, b int) spreadPart {
	return func(lo, hi int) (int, int) { return (lo - from) * b, (hi - lo) * b }
}

// spread is the down half: this rank takes its part from fl.from (the
// source has src) and passes each rank of fl.outs its part of it, chunk by
// chunk as they come. It returns the bytes it took: new bytes, or src.
func spread(l Link, fl flow, src []byte, part spreadPart) ([]byte, error) {
	out := outflow{l: l, ack: true}
	for _, o := range fl.outs {
		off, n := part(o.lo, o.hi)
		out.add(o.rank, off, n)
	}
	if fl.from < 0 {
		return src, out.fill(src, len(src), true)
	}
	_, size := part(fl.lo, fl.hi)
	cks := streamChunks(size)
	var buf []byte
	if len(cks) > 1 {
		buf = make([]byte, size)
	}
	for i, ch := range cks {
		f, err := takeChunk(l, fl.from, true, ch[1]-ch[0])
		if err != nil {
			return nil, err
		}
		if len(cks) == 1 {
			buf = f.Data // the result: never released
		} else {
			copy(buf[ch[0]:], f.Data)
			l.Release(f)
		}
		if err := out.fill(buf, ch[1], i == len(cks)-1); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// takeStream takes frames from rank from up to the first shorter than a
// chunk and returns their data, in new bytes, passing each frame's on to
// the ranks to as it comes.
func takeStream(l Link, from int, ack bool, to ...int) ([]byte, error) {
	var data []byte
	for {
		f, err := l.Take(from)
		if err != nil {
			return nil, err
		}
		if f.Ack != ack || len(f.Data) > chunk {
			return nil, l.Mismatch("collective mismatch in call %d: rank %d sent a frame of %d bytes (ack %v) where this rank's schedule takes at most %d (ack %v)", l.Seq(), from, len(f.Data), f.Ack, chunk, ack)
		}
		lo := len(data)
		// What was sent stays as it is: append copies to a new array.
		data = append(data, f.Data...)
		l.Release(f)
		for _, r := range to {
			if err := l.Send(r, ack, data[lo:]); err != nil {
				return nil, err
			}
		}
		if len(data)-lo < chunk {
			if data == nil {
				data = []byte{}
			}
			return data, nil
		}
	}
}

// sendStream sends data to rank to in streamChunks.
func sendStream(l Link, to int, ack bool, data []byte) error {
	for _, ch := range streamChunks(len(data)) {
		if err := l.Send(to, ack, data[ch[0]:ch[1]]); err != nil {
			return err
		}
	}
	return nil
}

// rootUp is the up half of bcast, scatter and barrier, whose only data is
// the root's: a rank takes an empty frame from each kid and sends its
// parent one, but the root's data goes up to rank 0 in their place. A
// rank whose subtree holds the root takes its other kids' frames first,
// then passes on the data from the kid below which the root is (the root
// sends its own, after check). It returns the root's data at the ranks
// whose subtree holds the root, nil elsewhere.
func rootUp(l Link, t tree, root int, data []byte, check func() error) ([]byte, error) {
	via := t.via(root)
	for i, k := range t.kids {
		if i == via {
			continue
		}
		f, err := takeChunk(l, k, false, 0)
		if err != nil {
			return nil, err
		}
		l.Release(f)
	}
	var up []int
	if t.parent >= 0 {
		up = []int{t.parent}
	}
	switch {
	case t.me == root:
		if check != nil {
			if err := check(); err != nil {
				return nil, err
			}
		}
		if t.parent >= 0 {
			return data, sendStream(l, t.parent, false, data)
		}
		return data, nil
	case via >= 0:
		return takeStream(l, t.kids[via], false, up...)
	}
	return nil, l.Send(t.parent, false, nil)
}

// rootDown begins the down half of bcast, scatter and barrier at a rank
// whose subtree holds the root, which has the root's data from rootUp: it
// takes an empty frame from its parent, which says every rank came, and
// sends the kid below which the root is one too (the data went up through
// it).
func rootDown(l Link, t tree, root int) error {
	if t.parent >= 0 {
		f, err := takeChunk(l, t.parent, true, 0)
		if err != nil {
			return err
		}
		l.Release(f)
	}
	if v := t.via(root); v >= 0 {
		return l.Send(t.kids[v], true, nil)
	}
	return nil
}

// treeBcast is bcast over the tree: the root's data goes up to rank 0 with
// the up half, then down to every rank but those it passed.
func treeBcast(l Link, c Call) ([]byte, error) {
	return bcastTree(l, newTree(l), c.Root, c.Data)
}

func bcastTree(l Link, t tree, root int, data []byte) ([]byte, error) {
	d, err := rootUp(l, t, root, data, nil)
	if err != nil {
		return nil, err
	}
	if !t.holds(root) {
		return takeStream(l, t.parent, true, t.kids...)
	}
	if err := rootDown(l, t, root); err != nil {
		return nil, err
	}
	via := t.via(root)
	for i, k := range t.kids {
		if i != via {
			if err := sendStream(l, k, true, d); err != nil {
				return nil, err
			}
		}
	}
	if t.me == root {
		return append([]byte{}, d...), nil
	}
	return d, nil
}

// treeBarrier is the tree's barrier: empty frames up to rank 0 and down
// again, 2 × depth steps (8 at 1,024 ranks) and at most topo.Radix+1
// partners. Dissemination would take ⌈log2 n⌉ steps (10) but give every
// rank 2⌈log2 n⌉ partners (20), most of them links no other call uses;
// the tree's are those of every other call here.
func treeBarrier(l Link, _ Call) ([]byte, error) {
	_, err := bcastTree(l, newTree(l), 0, nil)
	return nil, err
}

// treeScatter is scatter over the tree: the root's data goes up to rank 0
// as in bcast; down, each rank passes each kid its subtree's blocks and
// keeps its own (a rank off the root's way takes its part whole before
// cutting it: it does not know the block size before).
func treeScatter(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	d, err := rootUp(l, t, c.Root, c.Data, func() error {
		if len(c.Data)%t.n != 0 {
			return l.Mismatch("scatter: %d bytes are no whole number of %d blocks", len(c.Data), t.n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	base, count := 0, t.n // d's blocks are ranks [base, base+count)
	if t.holds(c.Root) {
		err = rootDown(l, t, c.Root)
	} else {
		base, count = t.me, t.hi-t.me
		d, err = takeStream(l, t.parent, true)
	}
	if err != nil {
		return nil, err
	}
	if len(d)%count != 0 {
		return nil, l.Mismatch("scatter: rank %d sent %d bytes for the %d blocks of ranks %d to %d", t.parent, len(d), count, base, base+count-1)
	}
	b := len(d) / count
	via := t.via(c.Root)
	for i, k := range t.kids {
		if i != via {
			if err := sendStream(l, k, true, d[(k-base)*b:(t.end(i)-base)*b]); err != nil {
				return nil, err
			}
		}
	}
	return append([]byte{}, d[(t.me-base)*b:][:b]...), nil
}

// treeGather gathers every rank's data at rank 0, which sends it down the
// way to the root (rank order is the tree's order: nothing to sort).
func treeGather(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	all, err := gatherUp(l, t, c.Kind, c.Data)
	if err != nil {
		return nil, err
	}
	res, err := spread(l, t.flowFrom(0), all, toward(c.Root, t.n*len(c.Data)))
	if err != nil || t.me != c.Root {
		return nil, err
	}
	return res, nil
}

// treeAllgather gathers every rank's data at rank 0, which sends it all
// down to every rank.
func treeAllgather(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	all, err := gatherUp(l, t, c.Kind, c.Data)
	if err != nil {
		return nil, err
	}
	return spread(l, t.flowFrom(0), all, whole(t.n*len(c.Data)))
}

// treeFold is the up half of the tree's reductions: every rank's data
// gathered to rank 0, which folds it in rank order (nil elsewhere).
func treeFold(l Link, t tree, c Call) ([]byte, error) {
	all, err := gatherUp(l, t, c.Kind, c.Data)
	if err != nil || t.me != 0 {
		return nil, err
	}
	b := len(c.Data)
	contrib := make([][]byte, t.n)
	for r := range contrib {
		contrib[r] = all[r*b : (r+1)*b]
	}
	return foldAll(c.Fold, contrib), nil
}

func treeReduce(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	res, err := treeFold(l, t, c)
	if err != nil {
		return nil, err
	}
	res, err = spread(l, t.flowFrom(0), res, toward(c.Root, len(c.Data)))
	if err != nil || t.me != c.Root {
		return nil, err
	}
	return res, nil
}

func treeAllreduce(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	res, err := treeFold(l, t, c)
	if err != nil {
		return nil, err
	}
	return spread(l, t.flowFrom(0), res, whole(len(c.Data)))
}

func treeReduceScatter(l Link, c Call) ([]byte, error) {
	t := newTree(l)
	res, err := treeFold(l, t, c)
	if err != nil {
		return nil, err
	}
	return ownBlock(l, t.flowFrom(0), res, len(c.Data)/t.n)
}

// ownBlock spreads the folded blocks from their source, each span its
// ranks' blocks, and returns this rank's block.
func ownBlock(l Link, fl flow, res []byte, b int) ([]byte, error) {
	got, err := spread(l, fl, res, blocks(fl.lo, b))
	if err != nil {
		return nil, err
	}
	me := l.Rank()
	return append([]byte{}, got[(me-fl.lo)*b:][:b]...), nil
}
