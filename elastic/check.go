package elastic

import (
	"slices"

	"sperli/topo"
)

// The check of a decision (docs/protocol.md §12.4). A coordinator that
// lies may sign two values and tell each to some members; no member may
// act on a value until it knows that every live member holds the same.
// Told to every member by every member, that costs n² messages; here it
// costs a few per member, in two parts:
//
//   - Ring: a member that learns the decision confirms it (value and
//     proof) to its topo.Watchers live successors and predecessors on the
//     ring of the live members. If two members hold different values, the
//     ring — which joins every live member — has two neighbours that
//     differ, and the one that sees both names the signer (conflict); with
//     one liar among them, at least one such pair is honest.
//   - Check tree: the members in reverse order form a range tree
//     (package topo) rooted at the highest live member. A member whose
//     ring neighbours all confirmed its value, and every one of whose
//     live children in the tree said its subtree checked, says so to its
//     parent (checked); the root then says down the tree that every live
//     member did (final). The coordinator, the only member that could
//     sign two values, is the lowest live member: the last of the reverse
//     order, a leaf of the check tree, so it can neither hide a
//     conflicting subtree nor vouch for one. A member that lies in the
//     check without being the coordinator holds one value like everyone
//     else: whatever it says, no two members act on two values.
//
// A member acts once its ring neighbours confirmed and the final came
// (Decided). Losses heal the ring and the tree (topo's rule), and a
// report, once true, stays true as its subtree loses members, so a
// member tells its parent again only when its parent changed.

// checkPos maps the members to the check tree's positions: the highest
// member is position 0, the root.
func (a *Agreement) checkPos(slot int) int {
	if i, ok := a.live.index(slot); ok {
		return a.live.len() - 1 - i
	}
	return -1
}

func (a *Agreement) checkSlot(pos int) int { return a.live.at(a.live.len() - 1 - pos) }

func (a *Agreement) checkLost(pos int) bool { return a.lost[a.checkSlot(pos)] }

// ringNeighbours are the live members this one confirms to and hears
// confirms from: Watchers each way on the ring of the members.
func (a *Agreement) ringNeighbours() []int {
	n, i := a.live.len(), a.checkPos(a.self)
	var out []int
	for _, p := range append(topo.Successors(n, i, topo.Watchers, a.checkLost), topo.Predecessors(n, i, topo.Watchers, a.checkLost)...) {
		if s := a.checkSlot(p); s != a.self && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (a *Agreement) checkChildren() []int {
	var out []int
	for _, p := range topo.LiveChildren(a.live.len(), a.checkPos(a.self), a.checkLost) {
		out = append(out, a.checkSlot(p))
	}
	return out
}

// checkParent is this member's parent in the check tree, -1 for the root.
func (a *Agreement) checkParent() int {
	p := topo.LiveParent(a.live.len(), a.checkPos(a.self), a.checkLost)
	if p < 0 {
		return -1
	}
	return a.checkSlot(p)
}

// unconfirmed is the first live ring neighbour whose confirm of the
// decision has not come, or -1.
func (a *Agreement) unconfirmed() int {
	for _, s := range a.ringNeighbours() {
		if !a.confirmed[s] {
			return s
		}
	}
	return -1
}

// stepCheck sends what the check now allows: confirms to ring neighbours
// not told yet, the subtree's report to the parent, the final down.
func (a *Agreement) stepCheck() []Out {
	if a.decided == nil || a.err != nil {
		return nil
	}
	msg := func(k Kind) Msg {
		return Msg{Kind: k, Gen: a.gen(), Value: a.decided, Proof: a.proof, Failed: a.failed()}
	}
	var out []Out
	for _, s := range a.ringNeighbours() {
		if !a.confirmSent[s] {
			a.confirmSent[s] = true
			out = append(out, Out{s, msg(Confirm)})
		}
	}
	kids := a.checkChildren()
	if a.final {
		// Children adopted since (a loss) hear it too, and a new parent
		// hears that this subtree checked: it may be a new root that the
		// final of the lost one did not reach.
		for _, k := range kids {
			if !a.finalSent[k] {
				a.finalSent[k] = true
				out = append(out, Out{k, msg(Final)})
			}
		}
		if p := a.checkParent(); p >= 0 && p != a.checkedTo {
			a.checkedTo = p
			out = append(out, Out{p, msg(Checked)})
		}
		return out
	}
	if a.unconfirmed() >= 0 {
		return out
	}
	for _, k := range kids {
		if !a.checked[k] {
			return out
		}
	}
	parent := a.checkParent()
	if parent < 0 {
		a.final = true
		for _, k := range kids {
			a.finalSent[k] = true
			out = append(out, Out{k, msg(Final)})
		}
		return out
	}
	if parent != a.checkedTo {
		a.checkedTo = parent
		out = append(out, Out{parent, msg(Checked)})
	}
	return out
}

// checkedIn takes a child's report that its subtree checked.
func (a *Agreement) checkedIn(from int) []Out {
	a.checked[from] = true
	if a.final {
		// It reported after the final went down (its parent changed).
		a.finalSent[from] = true
		return []Out{{from, Msg{Kind: Final, Gen: a.gen(), Value: a.decided, Proof: a.proof, Failed: a.failed()}}}
	}
	return a.stepCheck()
}

// finalIn takes the root's word, passed down by the parent.
func (a *Agreement) finalIn(from int) []Out {
	if a.final {
		return nil
	}
	a.final = true
	return a.stepCheck()
}

// awaitedCheck is the member a decided slot waits on: a ring neighbour's
// confirm, then a child's report, then the parent's final.
func (a *Agreement) awaitedCheck() (int, string) {
	if s := a.unconfirmed(); s >= 0 {
		return s, "confirm"
	}
	if a.final {
		return -1, ""
	}
	for _, k := range a.checkChildren() {
		if !a.checked[k] {
			return k, "check"
		}
	}
	if p := a.checkParent(); p >= 0 {
		return p, "final"
	}
	return -1, ""
}
