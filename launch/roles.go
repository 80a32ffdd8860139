package launch

import (
	"fmt"
	"strings"
	"sync"
)

// Who printed a line (SPEC §20: reports name both the rank and the slot).
// A slot is a process; the rank it serves can change: a spare takes a lost
// rank's place (SPEC §10.2), a shrink numbers the ranks anew. The launcher
// learns it from the slot's own generation reports, which come on its
// standard error, while the program's lines come on both streams; so the
// two streams of a slot share a slotRoles, and each line is labelled by
// the role known when it came; in the default mode, where lines are shown
// at the end, a line of standard output that came while the slot was a
// spare by the rank it became (slotRoles.shown).
//
// The label is "rank i" in a job without spares whose slot i is rank i
// (the seed's "[rank i] ", byte for byte), "rank 2 · slot 8" when a slot
// serves a rank in a job with spares or serves another rank than its own
// number, and "spare · slot 9" for a spare.

// role is what a slot serves from generation gen on: rank, or -1 as a
// spare.
type role struct{ gen, rank int }

// slotRoles is the roles of one slot of an incarnation, in the order the
// launcher learnt them; the first is the incarnation's start. It is safe
// for concurrent use.
type slotRoles struct {
	mu    sync.Mutex
	roles []role
}

func newSlotRoles(gen, rank int) *slotRoles {
	return &slotRoles{roles: []role{{gen, rank}}}
}

// add notes that the slot serves rank from generation gen on (its report
// of gen). A report of an older generation than the last one noted, or of
// the same rank, changes nothing.
func (r *slotRoles) add(gen, rank int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.roles[len(r.roles)-1]
	if gen < last.gen || rank == last.rank || rank < -1 {
		return
	}
	r.roles = append(r.roles, role{gen, rank})
}

// latest returns the newest role and its index.
func (r *slotRoles) latest() (int, role) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.roles) - 1, r.roles[len(r.roles)-1]
}

// shown returns the role the lines that came under roles[i] are shown as:
// that role, except that lines that came while the slot was a spare are
// the rank's that it became next. A spare runs no program, so such lines
// were printed after the promotion and read before its report, which
// came on the other stream.
func (r *slotRoles) shown(i int) role {
	r.mu.Lock()
	defer r.mu.Unlock()
	i = min(max(i, 0), len(r.roles)-1)
	if r.roles[i].rank < 0 {
		for _, later := range r.roles[i+1:] {
			if later.rank >= 0 {
				return later
			}
		}
	}
	return r.roles[i]
}

// at returns roles[i].
func (r *slotRoles) at(i int) role {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roles[min(max(i, 0), len(r.roles)-1)]
}

// all returns a copy of the roles.
func (r *slotRoles) all() []role {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]role(nil), r.roles...)
}

// label names slot serving ro: "rank i", "rank 2 · slot 8" or
// "spare · slot 9". spares says the job has spares.
func label(spares bool, slot int, ro role) string {
	switch {
	case ro.rank < 0:
		return fmt.Sprintf("spare · slot %d", slot)
	case !spares && ro.rank == slot:
		return fmt.Sprintf("rank %d", slot)
	}
	return fmt.Sprintf("rank %d · slot %d", ro.rank, slot)
}

// plainLabel reports whether label(spares, slot, ro) is the seed's
// "rank i" of slot i.
func plainLabel(spares bool, slot int, ro role) bool { return !spares && ro.rank == slot }

// (o *outputs) prefix is the prefix of a line of slot serving ro.
func (o *outputs) prefix(slot int, ro role) string {
	c := ro.rank
	if c < 0 {
		c = slot
	}
	return prefixOf(label(o.slots, slot, ro), c, o.color)
}

// trackName names a process's --trace track by every role it served:
// "rank 1 (node1)", "rank 0 · slot 0 (h)", "spare · slot 3, rank 1 from
// generation 1 (h)".
func trackName(spares bool, slot int, roles []role, host string, inc uint32) string {
	for _, ro := range roles {
		spares = spares || !plainLabel(false, slot, ro) // then name the slot from the first
	}
	var b strings.Builder
	b.WriteString(label(spares, slot, roles[0]))
	for _, ro := range roles[1:] {
		if ro.rank < 0 {
			fmt.Fprintf(&b, ", a spare from generation %d", ro.gen)
		} else {
			fmt.Fprintf(&b, ", rank %d from generation %d", ro.rank, ro.gen)
		}
	}
	fmt.Fprintf(&b, " (%s)", host)
	if inc > 0 {
		fmt.Fprintf(&b, " incarnation %d", inc)
	}
	return b.String()
}
