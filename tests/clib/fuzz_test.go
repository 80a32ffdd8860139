package clib

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// TestFuzzLibsperli runs scripts/libsperli/fuzz-libsperli.sh, the
// random-API fuzzer of the C layer (libsperli/test/fuzz_sperli.c): a few
// seconds with seed 1 in make test. make fuzz sets LIBSPERLI_FUZZTIME (a
// Go duration, its FUZZTIME) and runs it for that long with a seed from
// the clock, or LIBSPERLI_FUZZSEED; the seed is logged for a rerun.
func TestFuzzLibsperli(t *testing.T) {
	t.Parallel()
	secs, seed := 3.0, uint64(1)
	if v := os.Getenv("LIBSPERLI_FUZZTIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = 10 * time.Second // FUZZTIME may be a count ("100x"): a Go fuzzer's, not this one's
		}
		secs, seed = d.Seconds(), uint64(time.Now().UnixNano())
	}
	if v := os.Getenv("LIBSPERLI_FUZZSEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LIBSPERLI_FUZZSEED=%q: want a number", v)
		}
		seed = n
	}
	t.Logf("fuzz-libsperli.sh %d %g (LIBSPERLI_FUZZSEED=%d reruns it)", seed, secs, seed)
	cmd := exec.Command("sh", "scripts/libsperli/fuzz-libsperli.sh", strconv.FormatUint(seed, 10), strconv.FormatFloat(secs, 'f', -1, 64))
	cmd.Dir, cmd.Env = root, env
	r := testbin.Start(t, cmd).Wait(t, time.Duration(secs*float64(time.Second))+jobTimeout)
	if r.Code != 0 || !strings.Contains(r.Stdout, "fuzz_sperli: ok (") {
		t.Fatalf("fuzz-libsperli.sh: exit status %d, want 0 and \"fuzz_sperli: ok\"\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Log(strings.TrimSpace(r.Stdout))
}
