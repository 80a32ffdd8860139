package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small module: core.A embeds *B (which embeds C) and a sync.Mutex.
var files = map[string]string{
	"go.mod": "module example\n\ngo 1.22\n",
	"core/a.go": `package core

import "sync"

type A struct {
	*B
	sync.Mutex
	x, y int
	s    struct{ mu sync.RWMutex; n int }
}

func (a *A) Get() int { return a.x }
func (a A) put()      {}

func Init() *A { return &A{} }
`,
	"core/b.go": `package core

import lock "sync"

type B struct {
	C
	p  int
	mu *lock.Mutex
}

func (b *B) Run() {}

type C struct{ u, v, w int }

type notAStruct int

func long() {
` + strings.Repeat("\t_ = 1\n", 85) + `}
`,
	"core/big.go":     "package core\n" + strings.Repeat("// filler\n", 610),
	"core/ignored.go": "//go:build ignore\n\npackage core\n\ntype Ignored struct{ a, b int }\n",
	"core/x_test.go": `package core_test

import (
	"testing"

	"example/core"
)

func start() *core.A { return core.Init() }

func helper() *core.A { return start() }

var table = []func(){func() { helper() }}

func TestViaHelper(t *testing.T) { helper() }
func TestViaTable(t *testing.T)  { table[0]() }
func TestNone(t *testing.T)      { _ = core.A{} }
func Testlower(t *testing.T)     { helper() }
`,
	"core/in_test.go": `package core

import "testing"

func TestBare(t *testing.T)   { Init() }
func TestMethod(t *testing.T) { var a A; a.Init() }
`,
}

func TestAnalyze(t *testing.T) {
	root := t.TempDir()
	for name, src := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := analyze([]string{filepath.Join(root, "core")}, []string{"example/core.Init"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*typeShape{}
	for _, ts := range r.types {
		byName[ts.name] = ts
	}
	for _, tc := range []struct {
		name                           string
		fields, flat, methods, exp     int
		mutexes, flatMu, declPlusMeths int
	}{
		// A: *B, Mutex, x, y, s = 5; with embedded: B's 2+C's 3, Mutex 1, x, y, s.
		{"A", 5, 9, 2, 1, 2, 3, 6 + 1 + 1},
		{"B", 3, 5, 1, 1, 1, 1, 5 + 1},
		{"C", 3, 3, 0, 0, 0, 0, 1},
	} {
		ts := byName[tc.name]
		if ts == nil {
			t.Fatalf("no type %s in %v", tc.name, byName)
		}
		got := []int{ts.fields, ts.flat, ts.methods, ts.exported, ts.mutexes, ts.flatMu, ts.lines}
		want := []int{tc.fields, tc.flat, tc.methods, tc.exp, tc.mutexes, tc.flatMu, tc.declPlusMeths}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: fields, with embedded, methods, exported, mutexes, with embedded, lines = %v, want %v", tc.name, got, want)
				break
			}
		}
	}
	if len(r.types) != 3 {
		t.Errorf("%d struct types, want 3 (A, B, C; ignored.go is not built)", len(r.types))
	}
	if len(r.types) > 0 && r.types[0].name != "A" {
		t.Errorf("first type %s, want A (most fields with embedded)", r.types[0].name)
	}
	if len(r.longFuncs) != 1 || r.longFuncs[0].name != "core.long" || r.longFuncs[0].lines != 87 {
		t.Errorf("long functions = %+v, want core.long of 87 lines", r.longFuncs)
	}
	if len(r.longFiles) != 1 || !strings.HasSuffix(r.longFiles[0].name, "/big.go") || r.longFiles[0].lines != 611 {
		t.Errorf("long files = %+v, want big.go of 611 lines", r.longFiles)
	}
	tc := r.tests[0]
	// Testlower is no Test; TestMethod's a.Init is a method, not the sink.
	if tc.tests != 5 || strings.Join(tc.noJoinNames, " ") != "TestMethod TestNone" {
		t.Errorf("tests = %d, no join %v, want 5 and [TestMethod TestNone]", tc.tests, tc.noJoinNames)
	}
}
