package wire

import "fmt"

// CollKind is the kind of a collective call, the first byte of its call
// descriptor (Call.Kind). The numbers are part of the protocol: append
// only, never renumber. Runtime and its schedules (runtime/sched) both use
// this one list.
type CollKind uint8

// Collective kinds of the calls a program makes (SPEC §8).
const (
	CollBarrier       CollKind = 1
	CollBcast         CollKind = 2
	CollReduce        CollKind = 3
	CollAllreduce     CollKind = 4
	CollGather        CollKind = 5
	CollScatter       CollKind = 6
	CollAllgather     CollKind = 7
	CollAlltoall      CollKind = 8
	CollReduceScatter CollKind = 9
	CollSplit         CollKind = 10
	CollAgree         CollKind = 11 // Comm.Agree: no collective frames, named in waiting reports
)

// Internal collective kinds of checkpoint and resume; they take part in the
// job's sequence of calls like any collective, so a rank that checkpoints
// while another calls a collective is a mismatch (H1613). No program calls
// them, so they start at 64, far from the program's kinds.
const (
	CollCkptBegin     CollKind = 64
	CollCkptCommit    CollKind = 65
	CollResumeOffer   CollKind = 66
	CollResumeCommit  CollKind = 67
	CollResumeStatus  CollKind = 68
	CollResumeRestore CollKind = 69
)

// collNames are the names of the kinds in messages, waiting reports and
// status records; users script against them, so they do not change.
var collNames = map[CollKind]string{
	CollBarrier: "barrier", CollBcast: "bcast", CollReduce: "reduce", CollAllreduce: "allreduce",
	CollGather: "gather", CollScatter: "scatter", CollAllgather: "allgather", CollAlltoall: "alltoall",
	CollReduceScatter: "reduce_scatter", CollSplit: "split", CollAgree: "agree",
	CollCkptBegin: "checkpoint", CollCkptCommit: "checkpoint (commit)",
	CollResumeOffer: "resume", CollResumeCommit: "resume (commit)",
	CollResumeStatus: "resume (files)", CollResumeRestore: "resume (restore)",
}

// String returns the kind's name, "barrier" or "reduce_scatter", or
// "collective(N)" for a number the list does not have.
func (k CollKind) String() string {
	if s, ok := collNames[k]; ok {
		return s
	}
	return fmt.Sprintf("collective(%d)", uint8(k))
}
