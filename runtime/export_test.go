package runtime

import "sperli/wire"

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
	p := c.peers[dest]
	p.wmu.Lock()
	defer p.wmu.Unlock()
	h := wire.Header{Type: wire.Data, Incarnation: inc, Source: uint32(c.rank), Tag: uint32(tag), Length: uint32(len(data))}
	var b [wire.HeaderSize]byte
	h.Put(b[:])
	p.bw.Write(b[:])
	p.bw.Write(data)
	p.bw.Flush()
}
