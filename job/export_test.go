package job

import (
	"context"
	"testing"
)

// BootOverFakePMI bootstraps n slots at once over a fake PMI process
// manager (pmi_test.go) and returns their descriptions, for the tests of
// package job_test that join them.
func BootOverFakePMI(ctx context.Context, t *testing.T, n int) ([]*Job, []error) {
	f := newFakePMI(t, n)
	f.start()
	res := f.bootAll(ctx, nil, -1)
	js, errs := make([]*Job, n), make([]error, n)
	for i, r := range res {
		js[i], errs[i] = r.j, r.err
	}
	return js, errs
}
