package runtime

// The matcher pairs arriving messages with receives (SPEC §6, §8.1). It is a
// pure state machine: no goroutines, no clock, no I/O; the Comm guards it
// with its mutex. Messages of one (source, tag) leave in arrival order.
// A receive may name any source and/or any tag; then it takes, of the
// messages it fits, the one that arrived first, so messages of one source
// stay in order for it too. An arriving message goes to the receive posted
// first among those it fits. A probe waits for a message without taking it.

type matchKey struct {
	ctx uint32 // the communicator's id (0: the job's)
	src int    // job rank
	tag uint32
}

type message struct {
	data []byte
	cost int64  // credit to return when consumed
	seq  uint64 // arrival order
}

// recvOp is a posted receive (or probe). Its fields after done is closed
// are read-only.
type recvOp struct {
	ctx    uint32 // the communicator's id
	src    int    // job rank
	tag    uint32
	anySrc bool // src is ANY_SOURCE
	anyTag bool // tag is ANY_TAG
	probe  bool // wait for a message, do not take it
	done   chan struct{}
	data   []byte
	err    error
	cost   int64
	seq    uint64 // post order

	// What matched: the message's source, tag and length.
	gotSrc int
	gotTag uint32
	gotLen int

	finished bool // finish_recv was called; guarded by Comm.mu
	// An any-source receive: the losses known when it was posted, and
	// whether a call waits in it now (p2p.go); guarded by Comm.mu.
	lossesAtPost int
	waiting      bool
}

// fits reports whether a message from src with tag fits op. ANY_TAG is
// any program tag: the runtime's own (sysTag) never match it.
func (op *recvOp) fits(ctx uint32, src int, tag uint32) bool {
	return op.ctx == ctx && (op.anySrc || op.src == src) && ((op.anyTag && tag&sysTag == 0) || op.tag == tag)
}

func (op *recvOp) wild() bool { return op.anySrc || op.anyTag }

type matcher struct {
	unexpected map[matchKey][]message
	posted     map[matchKey][]*recvOp // receives naming source and tag
	wild       []*recvOp              // receives with a wildcard, in post order
	probes     []*recvOp              // probes waiting, in post order
	arrivals   uint64
	posts      uint64
}

func newMatcher(size int) *matcher {
	return &matcher{
		unexpected: make(map[matchKey][]message),
		posted:     make(map[matchKey][]*recvOp),
	}
}

// arrive takes a message from src with tag. It returns the operations it
// completes (the caller closes their done channels): waiting probes it
// fits, and the receive it goes to, if one is posted; else the message is
// kept for a later receive.
func (m *matcher) arrive(ctx uint32, src int, tag uint32, msg message) []*recvOp {
	var done []*recvOp
	if len(m.probes) > 0 {
		kept := m.probes[:0]
		for _, p := range m.probes {
			if p.fits(ctx, src, tag) {
				p.gotSrc, p.gotTag, p.gotLen = src, tag, len(msg.data)
				done = append(done, p)
			} else {
				kept = append(kept, p)
			}
		}
		clear(m.probes[len(kept):])
		m.probes = kept
	}
	k := matchKey{ctx, src, tag}
	var op *recvOp
	q := m.posted[k]
	if len(q) > 0 {
		op = q[0]
	}
	wi := -1
	for i, w := range m.wild {
		if w.fits(ctx, src, tag) {
			if op == nil || w.seq < op.seq {
				wi = i
			}
			break
		}
	}
	switch {
	case wi >= 0:
		op = m.wild[wi]
		m.wild = append(m.wild[:wi], m.wild[wi+1:]...)
	case op != nil:
		q[0] = nil
		if len(q) == 1 {
			delete(m.posted, k)
		} else {
			m.posted[k] = q[1:]
		}
	default:
		m.arrivals++
		msg.seq = m.arrivals
		m.unexpected[k] = append(m.unexpected[k], msg)
		return done
	}
	op.data, op.cost = msg.data, msg.cost
	op.gotSrc, op.gotTag, op.gotLen = src, tag, len(msg.data)
	return append(done, op)
}

// find returns the key of the kept message op takes: the first to arrive
// of those it fits.
func (m *matcher) find(op *recvOp) (matchKey, bool) {
	if !op.wild() {
		k := matchKey{op.ctx, op.src, op.tag}
		return k, len(m.unexpected[k]) > 0
	}
	var best matchKey
	var bestSeq uint64
	for k, q := range m.unexpected {
		if len(q) > 0 && op.fits(k.ctx, k.src, k.tag) && (bestSeq == 0 || q[0].seq < bestSeq) {
			best, bestSeq = k, q[0].seq
		}
	}
	return best, bestSeq != 0
}

// post adds a receive. It reports true when a kept message completed it at
// once (op.data is set), false when it waits.
func (m *matcher) post(op *recvOp) bool {
	m.posts++
	op.seq = m.posts
	if k, ok := m.find(op); ok {
		q := m.unexpected[k]
		msg := q[0]
		q[0] = message{}
		if len(q) == 1 {
			delete(m.unexpected, k)
		} else {
			m.unexpected[k] = q[1:]
		}
		op.data, op.cost = msg.data, msg.cost
		op.gotSrc, op.gotTag, op.gotLen = k.src, k.tag, len(msg.data)
		return true
	}
	if op.wild() {
		m.wild = append(m.wild, op)
	} else {
		k := matchKey{op.ctx, op.src, op.tag}
		m.posted[k] = append(m.posted[k], op)
	}
	return false
}

// probe looks for a kept message op fits, without taking it. It reports
// true when there is one (op's got fields tell it); else, when wait is set,
// op waits for the next message it fits.
func (m *matcher) probe(op *recvOp, wait bool) bool {
	op.probe = true
	if k, ok := m.find(op); ok {
		op.gotSrc, op.gotTag, op.gotLen = k.src, k.tag, len(m.unexpected[k][0].data)
		return true
	}
	if wait {
		m.posts++
		op.seq = m.posts
		m.probes = append(m.probes, op)
	}
	return false
}

// withdraw removes the posted receive or probe op, if it is still waiting.
// It reports false when op is not waiting (a message matched it already).
func (m *matcher) withdraw(op *recvOp) bool {
	remove := func(q []*recvOp) ([]*recvOp, bool) {
		for i, o := range q {
			if o == op {
				return append(q[:i:i], q[i+1:]...), true
			}
		}
		return q, false
	}
	var ok bool
	switch {
	case op.probe:
		m.probes, ok = remove(m.probes)
	case op.wild():
		m.wild, ok = remove(m.wild)
	default:
		k := matchKey{op.ctx, op.src, op.tag}
		var q []*recvOp
		if q, ok = remove(m.posted[k]); ok {
			if len(q) == 0 {
				delete(m.posted, k)
			} else {
				m.posted[k] = q
			}
		}
	}
	return ok
}

// cancelFrom removes and returns every posted receive and probe that only
// src can complete (the peer finished and will send nothing more).
func (m *matcher) cancelFrom(src int) []*recvOp {
	return m.cancel(func(op *recvOp) bool { return !op.anySrc && op.src == src })
}

// cancel removes and returns every posted receive and probe that fits.
func (m *matcher) cancel(fits func(*recvOp) bool) []*recvOp {
	var out []*recvOp
	keep := func(q []*recvOp) []*recvOp {
		kept := q[:0]
		for _, op := range q {
			if fits(op) {
				out = append(out, op)
			} else {
				kept = append(kept, op)
			}
		}
		clear(q[len(kept):])
		return kept
	}
	for k, q := range m.posted {
		if q = keep(q); len(q) == 0 {
			delete(m.posted, k)
		} else {
			m.posted[k] = q
		}
	}
	m.wild = keep(m.wild)
	m.probes = keep(m.probes)
	return out
}

// all removes and returns every posted receive and probe (the job ended).
func (m *matcher) all() []*recvOp {
	var out []*recvOp
	for k, q := range m.posted {
		out = append(out, q...)
		delete(m.posted, k)
	}
	out = append(out, m.wild...)
	out = append(out, m.probes...)
	m.wild, m.probes = nil, nil
	return out
}

// cancelCtx removes and returns every posted receive and probe of
// communicator ctx (it was revoked).
func (m *matcher) cancelCtx(ctx uint32) []*recvOp {
	return m.cancel(func(op *recvOp) bool { return op.ctx == ctx })
}
