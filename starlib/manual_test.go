package starlib_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sperli/starlib"
)

// TestManualListsEveryAttribute: section 2 of docs/starlark.md, the
// manual of `comm`, names every field and method a program finds on comm
// (as comm.NAME), and names none that comm does not have.
func TestManualListsEveryAttribute(t *testing.T) {
	b, err := os.ReadFile("../docs/starlark.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "## 2. `comm`"), strings.Index(doc, "## 3. `sperli`")
	if start < 0 || end < start {
		t.Fatalf("docs/starlark.md has no section 2 (comm) before section 3 (sperli)")
	}
	sec := doc[start:end]
	attrs := (&starlib.Comm{}).AttrNames()
	has := map[string]bool{}
	for _, a := range attrs {
		has[a] = true
		if !regexp.MustCompile(`comm\.` + regexp.QuoteMeta(a) + `\b`).MatchString(sec) {
			t.Errorf("comm.%s is not in the manual (docs/starlark.md §2)", a)
		}
	}
	types := map[string]bool{"op": true} // comm.op is the type of an open operation
	for _, m := range regexp.MustCompile("`comm\\.([A-Za-z_]+)").FindAllStringSubmatch(sec, -1) {
		if !has[m[1]] && !types[m[1]] {
			t.Errorf("the manual names comm.%s, which comm does not have", m[1])
		}
	}
	if len(attrs) < 30 {
		t.Errorf("comm has %d attributes, want the manual's 30 and more", len(attrs))
	}
}
