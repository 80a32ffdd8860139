package runtime

import (
	"fmt"
	"io"
	"sort"
	"time"

	"sperli/runtime/mesh"
	"sperli/wire"
)

// FreezeForTest stops c's monitor, so it sends no more heartbeats, as a
// hung process would. Test only.
func FreezeForTest(c *Comm) {
	close(c.stopMon)
	<-c.monDone
	c.stopMon = make(chan struct{})
	c.monDone = make(chan struct{})
	close(c.monDone)
}

// InjectForTest writes a data frame from c to rank dest stamped with
// incarnation inc. Test only.
func InjectForTest(c *Comm, dest int, inc uint32, tag int, data []byte) {
	h := wire.Header{Type: wire.Data, Incarnation: inc, Source: uint32(c.rank), Tag: uint32(tag), Length: uint32(len(data))}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+len(data))
	h.Put(b)
	linkedForTest(c, c.layout.Slot(dest)).WriteRaw(append(b, data...))
}

// linkedForTest is c's link to slot, made and attached now if it is not.
func linkedForTest(c *Comm, slot int) *peer {
	p := c.links.link(slot)
	<-p.Ready()
	return p
}

// SpinLimitForTest is spinLimit: the read spin limit of rank j.Rank.
var SpinLimitForTest = spinLimit

// PeerSpinForTest is the spin limit of c's connection to rank r, or -1
// when that connection stays in Go's poller (no fdConn below its TLS).
func PeerSpinForTest(c *Comm, r int) time.Duration {
	return linkedForTest(c, c.layout.Slot(r)).SpinLimit()
}

// RawWriteForTest writes b, raw bytes of frames, on c's connection to slot
// dest (a rank of generation 0, or a spare), bypassing every check of the sending side: the hostile peer of the
// tests is a rank that has joined with valid credentials and then lies on
// the wire. Test only.
func RawWriteForTest(c *Comm, dest int, b []byte) error {
	return linkedForTest(c, dest).WriteRaw(b)
}

// FrameCostForTest is mesh.FrameCost: the credit a frame of n payload bytes
// costs.
var FrameCostForTest = mesh.FrameCost

// TraceTo turns the trace records on, written to w, until the returned
// function turns them off (benchmarks of the cost of --trace).
func TraceTo(w io.Writer) func() {
	tracing.Store(&tracer{w: w})
	return func() { traceFlush(); tracing.Store(nil) }
}

// WaitText is what the waiting record says of op waiting in c.
func WaitText(c *Comm, op *RecvOp) string { return recvWait{r: op.r, c: c}.String() }

// ProbesWaiting is how many probes wait in c's job (a test waits for one
// to be posted).
func ProbesWaiting(c *Comm) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.match.probes)
}

// CrashForTest makes c's slot look dead to its peers, as a killed process
// does: its monitor stops and every connection closes, with no bye. The
// Comm must still be closed. Test only.
func CrashForTest(c *Comm) {
	FreezeForTest(c)
	// A killed process sends nothing more: its recovery, which would see
	// the connections break one by one and tell the peers not yet cut
	// off, stops first (Close then stops it again: a fresh channel).
	close(c.stopRec)
	<-c.recDone
	c.stopRec = make(chan struct{})
	// Nor does it tell of anything: its readers see its connections break
	// one by one as it breaks them, and without this a reader that ran
	// before the last break told the peers still linked that the slot at
	// its other end was lost — a lie no real crash tells (the simulation
	// saw it under load: a live slot named lost, and H1627).
	c.links.outcast.Store(true)
	for _, p := range c.links.peerList() {
		if p.Attached() {
			p.Break()
		} else {
			p.Close()
		}
	}
	c.links.stopLinks() // a killed process accepts no connection either
}

// DefaultSpinForTest is defaultSpin.
const DefaultSpinForTest = defaultSpin

// LinkedForTest lists the slots c's slot has a link to whose connection
// is made and not ended, in slot order.
func LinkedForTest(c *Comm) []int {
	var out []int
	for _, p := range c.links.peerList() {
		if p.Attached() && !p.Gone() {
			out = append(out, p.rank)
		}
	}
	return out
}

// SimStatsForTest is what a simulation reads of c's slot: the links it
// has now, the links it made over its life (each a handshake, dialed or
// accepted) and the frames it read.
func SimStatsForTest(c *Comm) (links int, made, frames int64) {
	for _, p := range c.links.peerList() {
		if p.Attached() && !p.Gone() {
			links++
		}
		frames += p.Frames()
	}
	return links, c.links.made.Load(), frames
}

// LossNewsForTest says whether c's slot knows slot lost, from whose news
// (-1: its own detector, the agreement or the program) and since when.
func LossNewsForTest(c *Comm, slot int) (from int, at time.Time, ok bool) {
	c.links.knownMu.Lock()
	defer c.links.knownMu.Unlock()
	k, ok := c.links.known[slot]
	return k.from, k.at, ok
}

// KnownLossesForTest lists every loss c's slot knows of: the slot, whose
// news told it (-1: its own sight) and why.
func KnownLossesForTest(c *Comm) []string {
	c.links.knownMu.Lock()
	defer c.links.knownMu.Unlock()
	var out []string
	for s, k := range c.links.known {
		out = append(out, fmt.Sprintf("slot %d (from %d at %v: %s)", s, k.from, k.at.Format("15:04:05.000000"), k.why))
	}
	sort.Strings(out)
	return out
}

// StopForTest makes c's slot as silent as a stopped process: its monitor
// and its recovery stop; its connections stay open. Test only.
func StopForTest(c *Comm) {
	FreezeForTest(c)
	close(c.stopRec)
	<-c.recDone
	c.stopRec = make(chan struct{})
}

// DropForTest closes c's link to slot as a slot that knows slot lost
// does (news.go, drop): a lost frame naming it is the link's last frame.
// Test only.
func DropForTest(c *Comm, slot int) {
	linkedForTest(c, slot)
	c.links.drop(slot, "dropped by the test")
}

// CloseLinkForTest closes c's link to slot, with nothing said. Test only.
func CloseLinkForTest(c *Comm, slot int) {
	linkedForTest(c, slot).Close()
}

// RelayedForTest is the relay frames c's slot sent or passed on.
func RelayedForTest(c *Comm) int64 { return c.links.relayed.Load() }

// RelayAbove is the job size above which agreement messages are relayed.
func RelayAbove() int { return relayAbove }

// SetRelayAboveForTest sets it, until the test ends.
func SetRelayAboveForTest(t interface{ Cleanup(func()) }, n int) {
	old := relayAbove
	relayAbove = n
	t.Cleanup(func() { relayAbove = old })
}

// SetStalledForTest makes c's slot one whose detector saw it not run for
// ms milliseconds, the stall seen at at (the job's clock). Test only.
func SetStalledForTest(c *Comm, ms int64, at time.Time) {
	c.links.stalledMS.Store(ms)
	c.links.stalledAt.Store(at.UnixNano())
}

// LinkAfterForTest makes the link to slot as a collective's frame to a
// lower slot does (links.linkAfter): its dial waits up to wait for the
// peer's own.
func LinkAfterForTest(c *Comm, slot int, wait time.Duration) { c.links.linkAfter(slot, wait) }
