package job_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"sperli/job"
	"sperli/runtime"
)

// TestPMIBootstrapJoins: three slots bootstrap over a fake PMI, join as a
// job (real certificates, tokens and TLS), and do a barrier and an
// allreduce.
func TestPMIBootstrapJoins(t *testing.T) {
	const n = 3
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, errs := job.BootOverFakePMI(ctx, t, n)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	comms := make([]*runtime.Comm, n)
	var wg sync.WaitGroup
	for i := range js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := runtime.Init(ctx, js[i])
			if err != nil {
				errs[i] = err
				return
			}
			comms[i] = c
			if err := c.Barrier(ctx); err != nil {
				errs[i] = err
				return
			}
			out, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, uint64(i+1)))
			if err == nil && !bytes.Equal(out, binary.LittleEndian.AppendUint64(nil, 6)) {
				err = fmt.Errorf("allreduce gave %x, want 6", out)
			}
			if err == nil {
				err = c.Finish()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
		if comms[i] != nil {
			comms[i].Close()
		}
	}
}
