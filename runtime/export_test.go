package runtime

// FreezeForTest stops c's monitor, so it sends no more heartbeats, as a
// hung process would. Test only.
func FreezeForTest(c *Comm) {
	close(c.stopMon)
	<-c.monDone
	c.stopMon = make(chan struct{})
	c.monDone = make(chan struct{})
	close(c.monDone)
}
