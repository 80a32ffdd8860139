//go:build !linux

package job

import (
	"io/fs"
	"os"
)

// peekSource: no look-ahead here; pipes and sockets are read a byte at a
// time.
func peekSource(f *os.File, mode fs.FileMode) lineSource { return nil }
