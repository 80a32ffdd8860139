package runtime

import (
	"errors"
	"sync"

	"sperli/ckpt"
	"sperli/pki"
)

// Hook is the narrow part of the core that a feature built over Comm's
// public calls needs beside them: today the work queue (package workq).
// Everything else such a package does goes through Comm's public methods
// (Split, Send, RecvFrom, the collectives, Failed, Revoke, Slot,
// Incarnation, Job). A Hook is a value; its methods are safe for
// concurrent use.
type Hook struct{ c *Comm }

// Hook returns c's hook.
func (c *Comm) Hook() Hook { return Hook{c} }

// durable is the process's registry of what a feature keeps by name
// across generations and communicators (a work queue's log).
type durable struct {
	mu sync.Mutex
	m  map[string]any
}

// Keep returns the value this process keeps under name, made by mk (under
// the registry's lock: keep it short) the first time it is asked for. The
// value lives as long as the process's slot, across generations,
// in-place recoveries and the communicators a shrink returns. Whatever
// the value holds, its own lock guards.
func (h Hook) Keep(name string, mk func() any) any {
	d := &h.c.links.keep
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]any{}
	}
	v, ok := d.m[name]
	if !ok {
		v = mk()
		d.m[name] = v
	}
	return v
}

// Lost is closed at the next loss this slot learns of (a wake: ask Failed
// what was lost).
func (h Hook) Lost() <-chan struct{} { return h.c.links.losses() }

// LossReturn reports whether the program manages its losses
// (SetOnLoss(LossReturn)): a loss is then the program's to handle, and
// a feature revokes its communicator so that no rank waits for ever.
func (h Hook) LossReturn() bool { return h.c.links.lossReturn.Load() }

// Slots is the number of the job's slots: every slot number is below it.
func (h Hook) Slots() int { return h.c.links.slots }

// SlotOf is the slot that serves rank r of the communicator.
func (h Hook) SlotOf(r int) int { return h.c.worldSlot(r) }

// JobRank is the job rank of rank r of the communicator (errors name it).
func (h Hook) JobRank(r int) int { return h.c.worldRank(r) }

// End ends the job because this rank found err (a peer's lie, a storage
// error): the others return H1612 with it as the cause. Unlike Fail it
// does not close the communicator: the caller returns err.
func (h Hook) End(err error) { h.c.fail(err) }

// FailurePoint dies, as a crash would, where the job's test failure
// schedule says (point and its k-th time); else it does nothing.
func (h Hook) FailurePoint(point string, k int) { h.c.failurePoint(point, k) }

// CheckpointStore opens (making them as needed) the job's checkpoint
// directory DIR/<job> as a ckpt.Store, an os.Root no name leaves; nil, nil
// when the job has no checkpoint directory. The caller closes it.
func (h Hook) CheckpointStore() (*ckpt.Store, error) {
	if h.c.job.CheckpointDir == "" {
		return nil, nil
	}
	return ckpt.OpenStore(h.c.job.CheckpointDir, h.c.job.ID)
}

// CanSignWorkLog reports whether this slot holds the job key (rank 0 of
// the job, or a spare): only then can it sign a work queue's log.
func (h Hook) CanSignWorkLog() bool { return h.c.jobPriv != nil }

// SignWorkLog signs msg with the job key in the work log's domain
// (pki.DomainWorkLog), and no other: the hook cannot sign a COMMIT.
func (h Hook) SignWorkLog(msg []byte) ([]byte, error) {
	if h.c.jobPriv == nil {
		return nil, errNoJobKey
	}
	return h.c.jobPriv.Sign(pki.DomainWorkLog, msg)
}

// VerifyWorkLog reports whether sig is the job key's signature of msg in
// the work log's domain.
func (h Hook) VerifyWorkLog(msg, sig []byte) bool {
	return h.c.jobPub.Verify(pki.DomainWorkLog, msg, sig)
}

var errNoJobKey = errors.New("this slot does not hold the job key")

// WorkLogSignatureSize is the size of a SignWorkLog signature.
const WorkLogSignatureSize = pki.SignatureSize

// worldSlot is the slot of rank r of c.
func (c *Comm) worldSlot(r int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slotOfLocked(r)
}
