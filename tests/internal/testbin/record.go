package testbin

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Generation is one line of a `sperli run --record` file (protocol.md
// §12.7), decoded by the tests on their own, not with the launcher's type.
type Generation struct {
	Job    string         `json:"job"`
	Gen    int            `json:"generation"`
	Size   int            `json:"size"`
	Ranks  []int          `json:"ranks"`
	Spares []int          `json:"spares"`
	Lost   []int          `json:"lost"`
	Hosts  map[string]any `json:"hosts"`
	Pids   map[string]int `json:"pids"`
	Cause  string         `json:"cause"`
	Prev   string         `json:"prev"`
}

// ReadRecord reads a generation record and checks what holds for every
// job, reading nothing but the file: each line decodes strictly (no other
// keys), generations are consecutive from 0, each line's prev is the
// SHA-256 of the line before, size is the number of ranks, rank r is slot
// r in generation 0, every later generation records a loss and no slot is
// recorded lost twice, and a slot of two generations has the same pid in
// both (it was not relaunched). The caller checks the layout rules of its
// job on the generations returned.
func ReadRecord(t testing.TB, path string) []Generation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var gens []Generation
	prev := ""
	lost := map[int]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		dec := json.NewDecoder(strings.NewReader(string(line)))
		dec.DisallowUnknownFields()
		var g Generation
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("record line %d: %v: %s", len(gens)+1, err, line)
		}
		if g.Gen != len(gens) {
			t.Fatalf("record line %d is generation %d, want %d (consecutive)", len(gens)+1, g.Gen, len(gens))
		}
		if g.Prev != prev {
			t.Fatalf("generation %d: prev %q, want the SHA-256 of the line before, %q", g.Gen, g.Prev, prev)
		}
		sum := sha256.Sum256(line)
		prev = hex.EncodeToString(sum[:])
		if len(g.Ranks) != g.Size {
			t.Fatalf("generation %d: size %d with %d ranks", g.Gen, g.Size, len(g.Ranks))
		}
		if len(gens) > 0 {
			if len(g.Lost) == 0 && g.Cause != "restart" {
				t.Fatalf("generation %d records no loss", g.Gen)
			}
			for k, pid := range g.Pids {
				if old, ok := gens[len(gens)-1].Pids[k]; ok && old != pid && g.Cause != "restart" {
					t.Fatalf("generation %d: slot %s has pid %d, was %d (relaunched)", g.Gen, k, pid, old)
				}
			}
		}
		for _, s := range g.Lost {
			if lost[s] {
				t.Fatalf("slot %d recorded lost twice (generation %d)", s, g.Gen)
			}
			lost[s] = true
		}
		gens = append(gens, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(gens) == 0 {
		t.Fatal("the record is empty")
	}
	for r, s := range gens[0].Ranks {
		if s != r {
			t.Fatalf("generation 0: rank %d is slot %d", r, s)
		}
	}
	return gens
}
