package runtime_test

import (
	"io"
	"time"
)

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// neverEnding is a control channel that never reaches its end.
type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	time.Sleep(time.Hour)
	return 0, io.EOF
}
