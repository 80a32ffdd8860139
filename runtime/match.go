package runtime

// The matcher pairs arriving messages with receives (SPEC §6). It is a pure
// state machine: no goroutines, no clock, no I/O; the Comm guards it with
// its mutex. Messages of one (source, tag) leave in arrival order, receives
// of one (source, tag) are served in the order they were posted.

type matchKey struct {
	src int
	tag uint32
}

type message struct {
	data []byte
	cost int64 // credit to return when consumed
}

// recvOp is a posted receive. Its fields after done is closed are read-only.
type recvOp struct {
	src  int
	tag  uint32
	done chan struct{}
	data []byte
	err  error
	cost int64

	finished bool // finish_recv was called; guarded by Comm.mu
}

type matcher struct {
	unexpected map[matchKey][]message
	posted     map[matchKey][]*recvOp
	buffered   []int64 // bytes of unexpected messages held, by source
}

func newMatcher(size int) *matcher {
	return &matcher{
		unexpected: make(map[matchKey][]message),
		posted:     make(map[matchKey][]*recvOp),
		buffered:   make([]int64, size),
	}
}

// arrive takes a message from src with tag. It returns the posted receive
// it completes (the caller closes its done channel), or nil when the message
// is kept for a later receive.
func (m *matcher) arrive(src int, tag uint32, msg message) *recvOp {
	k := matchKey{src, tag}
	if q := m.posted[k]; len(q) > 0 {
		op := q[0]
		q[0] = nil
		if len(q) == 1 {
			delete(m.posted, k)
		} else {
			m.posted[k] = q[1:]
		}
		op.data, op.cost = msg.data, msg.cost
		return op
	}
	m.unexpected[k] = append(m.unexpected[k], msg)
	m.buffered[src] += msg.cost
	return nil
}

// post adds a receive. It reports true when a kept message completed it at
// once (op.data is set), false when it waits.
func (m *matcher) post(op *recvOp) bool {
	k := matchKey{op.src, op.tag}
	if q := m.unexpected[k]; len(q) > 0 {
		msg := q[0]
		q[0] = message{}
		if len(q) == 1 {
			delete(m.unexpected, k)
		} else {
			m.unexpected[k] = q[1:]
		}
		m.buffered[op.src] -= msg.cost
		op.data, op.cost = msg.data, msg.cost
		return true
	}
	m.posted[k] = append(m.posted[k], op)
	return false
}

// withdraw removes the posted receive op, if it is still waiting. It
// reports false when op is not posted (a message matched it already).
func (m *matcher) withdraw(op *recvOp) bool {
	k := matchKey{op.src, op.tag}
	q := m.posted[k]
	for i, o := range q {
		if o != op {
			continue
		}
		if len(q) == 1 {
			delete(m.posted, k)
		} else {
			m.posted[k] = append(q[:i:i], q[i+1:]...)
		}
		return true
	}
	return false
}

// cancelFrom removes and returns every posted receive from src (the peer
// finished and will send nothing more).
func (m *matcher) cancelFrom(src int) []*recvOp {
	var out []*recvOp
	for k, q := range m.posted {
		if k.src == src {
			out = append(out, q...)
			delete(m.posted, k)
		}
	}
	return out
}

// all removes and returns every posted receive (the job ended).
func (m *matcher) all() []*recvOp {
	var out []*recvOp
	for k, q := range m.posted {
		out = append(out, q...)
		delete(m.posted, k)
	}
	return out
}
