package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
)

// TestPeakRSSIsOwn: the peak resident size a rank reports is its own, not
// its parent's. The parent here holds 256 MiB resident when it starts
// the child (itself, in a mode that prints peakRSSKB); getrusage's
// ru_maxrss in the child included them, as every rank's figure included
// its launcher's size.
func TestPeakRSSIsOwn(t *testing.T) {
	if os.Getenv("SPERLI_TEST_PEAK_CHILD") == "1" {
		fmt.Printf("peak_kb=%d\n", peakRSSKB())
		return
	}
	const big = 256 << 20
	// Populated by the kernel, outside Go's heap: resident at once, with
	// nothing for the race detector to shadow.
	m, err := syscall.Mmap(-1, 0, big, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	self := peakRSSKB()
	if self < big>>10 {
		t.Fatalf("this process's peak is %d KiB with %d KiB populated", self, big>>10)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeakRSSIsOwn$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPERLI_TEST_PEAK_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mm := regexp.MustCompile(`peak_kb=(\d+)`).FindSubmatch(out)
	if mm == nil {
		t.Fatalf("child printed no peak:\n%s", out)
	}
	child, _ := strconv.ParseInt(string(mm[1]), 10, 64)
	if child <= 0 || child >= big>>11 {
		t.Errorf("the child reports a peak of %d KiB, its parent's %d KiB held at its start; want its own (under %d)", child, self, big>>11)
	}
}
