//go:build !linux

package runtime

import "syscall"

// stopSelf stops the process with SIGSTOP and returns once it is
// continued (the shell's part of the failure point stop-collective-K).
func stopSelf() { syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
