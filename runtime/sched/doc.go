// Package sched holds the collective algorithms of Sperli (SPEC §8) and
// the table that chooses one for each call: star, dissemination, bruck,
// the block reduce-scatter/allgather of large reductions, the pipelined
// chain of a large bcast, the ring allgather and the pairwise alltoall on
// up to 32 ranks; from 33 ranks, where a rank would otherwise open a link
// to every rank, the tree (topo's spanning tree: a rank's partners are its
// parent and at most 8 kids), the chain that folds large reductions, the
// ring, bruck's alltoall for small blocks (2⌈log2 n⌉ partners) and
// pairwise alltoall for the rest.
// It does no I/O, reads no clock and starts no goroutine: a schedule sees
// one call through a Link (its rank, its size, Send and Take of the
// call's frames, Release, Mismatch) and folds reductions with the Fold it
// is given, in rank order. Package runtime implements Link over its
// connections, with the call's descriptor, credits, voids and failures
// behind it, and Fold over its typed reductions; the tests here implement
// both over channels, with no socket.
//
// Run runs a call by the first line of the table that fits its kind, rank
// count and bytes per rank (Choose; the table, in table.go, says which
// algorithm runs what). Every rank chooses alike from what every rank
// knows, so all run the same schedule. Adding an algorithm is one file
// with a Schedule and one line of the table.
//
//	res, err := sched.Run(link, sched.Call{Kind: wire.CollAllreduce, Data: mine, Fold: sum})
//
// A schedule returns the Link's errors as they are and reports frames it
// does not expect by Link.Mismatch. It never copies data it sends: the
// frames alias the caller's data and the result until they are written.
package sched
