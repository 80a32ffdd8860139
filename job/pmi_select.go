//go:build linux && (amd64 || arm64)

package job

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// dataWaiting reports whether the pipe or socket f has bytes to read now
// or within d; its end (no writer) is no data. Nothing is read.
func dataWaiting(f *os.File, d time.Duration) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	rc.Control(func(fd uintptr) {
		if fd >= syscall.FD_SETSIZE {
			return
		}
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (fd % 64)
		tv := syscall.NsecToTimeval(d.Nanoseconds())
		for {
			n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				return
			}
			break
		}
		var avail int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&avail))); e == 0 {
			waiting = avail > 0
		}
	})
	return waiting
}
