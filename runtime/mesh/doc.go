// Package mesh is one connection of a job's full mesh once its join is
// done: a Peer reads whole frames and hands them up, writes frames from
// the sending goroutine when nothing is queued before them (else from its
// writer goroutine), keeps the credit window of SPEC §6 both ways, corks
// large frames below TLS and, on Linux, reads its socket outside Go's
// poller with a bounded spin (fdconn_linux.go).
//
// A Peer talks upward only through its Sink: a frame arrived, the
// connection was lost, the peer broke the protocol; it asks the Sink
// whether the rank is closing, whether losses are expected now, the
// generation to stamp and the generation's end. It never calls the layer
// above otherwise, so it runs over any net.Conn — a TLS connection on a
// socket, or one on package memnet's in-memory pipes — with a fake Sink
// in its tests. The join (hello, tokens, refusals) is not here; the TLS
// configuration every connection uses is (TLSConfig).
package mesh
