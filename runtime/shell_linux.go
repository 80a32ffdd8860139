package runtime

import (
	goruntime "runtime"
	"syscall"
)

// stopSelf stops the process with SIGSTOP and returns once it is
// continued (the shell's part of the failure point stop-collective-K). The
// signal goes to the calling thread, so that this goroutine stops where it
// is: sent to the process, it reaches the main thread first, and the
// caller runs on until the stop spreads — long enough to send a frame.
func stopSelf() {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
