// Command coreshape prints the shape of the Go packages in the given
// directories (issue 46): for each named struct type its lines, fields,
// methods and mutexes; the files over 600 lines; the functions over 80
// lines; the Test functions that reach no join; and totals.
//
//	go run ./scripts/bench/coreshape [-v] [-sinks LIST] [DIR...]
//	go run ./scripts/bench/coreshape runtime runtime/sched runtime/mesh workq ckpt
//
// DIR defaults to runtime; run it from the module root. It reads the
// source only (go/parser, no type checking), the files the default build
// context would compile (GOOS, GOARCH, no tags), and counts:
//
//   - lines of a type: its declaration (type spec, doc comment not
//     counted) plus every method declared on it (func to closing brace);
//   - fields: the names its struct declares, an embedded field counting
//     one; "with embedded" replaces each embedded field by the fields of
//     the embedded type, flattened through every level, when that type is
//     a struct of a package given (else it counts one); fields of a named
//     struct type that is not embedded count one;
//   - methods: declared on T or *T (promoted ones not counted), and how
//     many of them are exported;
//   - mutexes: fields of type sync.Mutex or sync.RWMutex (or a pointer to
//     one), also inside an anonymous struct field's type; "with embedded"
//     as for fields;
//   - functions over 80 lines: function and method declarations, func to
//     closing brace; files over 600 lines: every line of a non-test file.
//
// Tests ("no join"): a Test function of a directory's _test.go files
// (both the package and its _test package) reaches a join when its body,
// or a function, method or package-level variable of the test files that
// it names (by name: a method name matches every method of that name in
// the test files), transitively, names a sink: a qualified identifier
// PATH.Name of -sinks, called through the file's import of PATH or, in
// the package PATH itself, bare. The default sinks are the entries into
// the join: sperli/runtime.Init, sperli/runtime.Run (which calls Init),
// sperli/runtime.join (which Init calls; internal tests) and
// sperli/runtime/runtimetest.InitAll. Matching by name errs towards
// "reaches a join", never the other way. -v lists the tests that reach
// no join.
//
// Output is plain text: one table of struct types sorted by fields with
// embedded, descending, then the long files and functions, the tests and
// the totals.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	longFunc = 80
	longFile = 600
)

var defaultSinks = "sperli/runtime.Init,sperli/runtime.Run,sperli/runtime.join,sperli/runtime/runtimetest.InitAll"

func main() { os.Exit(doMain()) }

func doMain() int {
	sinks := flag.String("sinks", defaultSinks, "comma-separated `PATH.Name` entries into the join")
	verbose := flag.Bool("v", false, "also list the Test functions that reach no join")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/bench/coreshape [-v] [-sinks LIST] [DIR...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"runtime"}
	}
	r, err := analyze(dirs, strings.Split(*sinks, ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, "coreshape:", err)
		return 1
	}
	r.print(os.Stdout, *verbose)
	return 0
}

// typeShape is what coreshape reports of one named struct type.
type typeShape struct {
	pkg, name string
	pos       string // file:line of the declaration
	lines     int    // declaration plus methods
	fields    int
	flat      int // fields with embedded ones flattened
	methods   int
	exported  int
	mutexes   int
	flatMu    int

	st    *ast.StructType
	file  *ast.File
	dir   *pkgDir
	ready bool // flat and flatMu computed
	busy  bool // being computed (a cycle through pointers)
}

type longOne struct {
	name, pos string
	lines     int
}

type testCount struct {
	dir           string
	tests, noJoin int
	noJoinNames   []string
}

// pkgDir is one directory's package.
type pkgDir struct {
	dir, path, name string
	files           []*ast.File
	tests           []*ast.File
	lines           int
}

type report struct {
	types      []*typeShape
	longFiles  []longOne
	longFuncs  []longOne
	tests      []testCount
	pkgs       []*pkgDir
	funcs      int
	fset       *token.FileSet
	totalLines int
}

// analyze parses dirs and measures them; sinks are PATH.Name entries.
func analyze(dirs []string, sinks []string) (*report, error) {
	r := &report{fset: token.NewFileSet()}
	byPath := map[string]*pkgDir{}
	for _, d := range dirs {
		p, err := parseDir(r.fset, d)
		if err != nil {
			return nil, err
		}
		r.pkgs = append(r.pkgs, p)
		byPath[p.path] = p
	}
	types := map[string]*typeShape{} // "path.Name"
	for _, p := range r.pkgs {
		for _, f := range p.files {
			r.measureFile(p, f, types)
		}
	}
	for _, p := range r.pkgs {
		for _, f := range p.files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
					continue
				}
				t := types[p.path+"."+recvName(fd.Recv.List[0].Type)]
				if t == nil {
					continue
				}
				t.methods++
				if fd.Name.IsExported() {
					t.exported++
				}
				t.lines += r.span(fd)
			}
		}
	}
	for _, t := range types {
		flatten(t, types)
		r.types = append(r.types, t)
	}
	sort.Slice(r.types, func(i, j int) bool {
		a, b := r.types[i], r.types[j]
		if a.flat != b.flat {
			return a.flat > b.flat
		}
		if a.fields != b.fields {
			return a.fields > b.fields
		}
		return a.pkg+"."+a.name < b.pkg+"."+b.name
	})
	sort.SliceStable(r.longFuncs, func(i, j int) bool { return r.longFuncs[i].lines > r.longFuncs[j].lines })
	sort.SliceStable(r.longFiles, func(i, j int) bool { return r.longFiles[i].lines > r.longFiles[j].lines })
	sinkSet := map[string]bool{}
	for _, s := range sinks {
		if s = strings.TrimSpace(s); s != "" {
			sinkSet[s] = true
		}
	}
	for _, p := range r.pkgs {
		r.tests = append(r.tests, countTests(p, sinkSet))
	}
	return r, nil
}

func parseDir(fset *token.FileSet, dir string) (*pkgDir, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkgDir{dir: filepath.ToSlash(filepath.Clean(dir)), path: importPath(dir)}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(n, "_test.go") {
			p.tests = append(p.tests, f)
			continue
		}
		if p.name == "" {
			p.name = f.Name.Name
		}
		p.files = append(p.files, f)
	}
	if len(p.files) == 0 && len(p.tests) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	return p, nil
}

// importPath is dir's import path from the nearest go.mod above it, or dir.
func importPath(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return filepath.ToSlash(dir)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "module" {
					rel, _ := filepath.Rel(d, abs)
					if rel == "." {
						return f[1]
					}
					return f[1] + "/" + filepath.ToSlash(rel)
				}
			}
		}
		if filepath.Dir(d) == d {
			return filepath.ToSlash(dir)
		}
	}
}

func (r *report) span(n ast.Node) int {
	return r.fset.Position(n.End()).Line - r.fset.Position(n.Pos()).Line + 1
}

func (r *report) measureFile(p *pkgDir, f *ast.File, types map[string]*typeShape) {
	tf := r.fset.File(f.Pos())
	n := tf.LineCount()
	p.lines += n
	r.totalLines += n
	name := p.dir + "/" + filepath.Base(tf.Name())
	if n > longFile {
		r.longFiles = append(r.longFiles, longOne{name: name, lines: n})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			r.funcs++
			if l := r.span(d); l > longFunc {
				fn := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) > 0 {
					fn = recvName(d.Recv.List[0].Type) + "." + fn
				}
				pos := r.fset.Position(d.Pos())
				r.longFuncs = append(r.longFuncs, longOne{name: p.name + "." + fn, pos: name + ":" + strconv.Itoa(pos.Line), lines: l})
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue
			}
			for _, s := range d.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || ts.Assign.IsValid() {
					continue
				}
				t := &typeShape{
					pkg: p.name, name: ts.Name.Name, st: st, file: f, dir: p,
					pos:   name + ":" + strconv.Itoa(r.fset.Position(ts.Pos()).Line),
					lines: r.span(ts),
				}
				for _, fl := range st.Fields.List {
					if len(fl.Names) == 0 {
						t.fields++
					} else {
						t.fields += len(fl.Names)
					}
					k := len(fl.Names)
					if k == 0 {
						k = 1
					}
					t.mutexes += k * mutexesIn(fl.Type, f)
				}
				types[p.path+"."+ts.Name.Name] = t
			}
		}
	}
}

// recvName is the type name of a receiver: T, *T, T[P], *T[P].
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// importOf is the import path that name stands for in f, or "".
func importOf(f *ast.File, name string) string {
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		if local == name {
			return path
		}
	}
	return ""
}

// mutexesIn counts the sync.Mutex and sync.RWMutex in a field's type,
// looking through pointers and anonymous structs.
func mutexesIn(e ast.Expr, f *ast.File) int {
	switch x := e.(type) {
	case *ast.StarExpr:
		return mutexesIn(x.X, f)
	case *ast.ParenExpr:
		return mutexesIn(x.X, f)
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && importOf(f, id.Name) == "sync" && (x.Sel.Name == "Mutex" || x.Sel.Name == "RWMutex") {
			return 1
		}
	case *ast.StructType:
		n := 0
		for _, fl := range x.Fields.List {
			k := len(fl.Names)
			if k == 0 {
				k = 1
			}
			n += k * mutexesIn(fl.Type, f)
		}
		return n
	}
	return 0
}

// embedded resolves an embedded field's type to a struct type of the
// packages given, or nil.
func embedded(e ast.Expr, f *ast.File, self *pkgDir, types map[string]*typeShape) *typeShape {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
			continue
		case *ast.IndexExpr:
			e = x.X
			continue
		case *ast.IndexListExpr:
			e = x.X
			continue
		case *ast.Ident:
			return types[self.path+"."+x.Name]
		case *ast.SelectorExpr:
			id, ok := x.X.(*ast.Ident)
			if !ok {
				return nil
			}
			return types[importOf(f, id.Name)+"."+x.Sel.Name]
		}
		return nil
	}
}

func flatten(t *typeShape, types map[string]*typeShape) {
	if t.ready || t.busy {
		return
	}
	t.busy = true
	for _, fl := range t.st.Fields.List {
		if len(fl.Names) > 0 {
			t.flat += len(fl.Names)
			t.flatMu += len(fl.Names) * mutexesIn(fl.Type, t.file)
			continue
		}
		if e := embedded(fl.Type, t.file, t.dir, types); e != nil && !e.busy {
			flatten(e, types)
			t.flat += e.flat
			t.flatMu += e.flatMu
			continue
		}
		t.flat++
		t.flatMu += mutexesIn(fl.Type, t.file)
	}
	t.busy, t.ready = false, true
}

// isTest reports whether fd is a Test function as go test finds them.
func isTest(fd *ast.FuncDecl) bool {
	if fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Test") {
		return false
	}
	rest := fd.Name.Name[len("Test"):]
	if rest != "" {
		r, _ := utf8.DecodeRuneInString(rest)
		if unicode.IsLower(r) {
			return false
		}
	}
	return fd.Type.Params != nil && len(fd.Type.Params.List) == 1
}

// refGraph is what each name declared in a package's test files names,
// merged over every declaration of that name (methods of different
// types too), and whether it names a sink itself.
type refGraph struct {
	sinks    map[string]bool
	declared map[string]bool
	refs     map[string][]string
	sink     map[string]bool
}

// countTests counts p's Test functions and those that reach no sink.
func countTests(p *pkgDir, sinks map[string]bool) testCount {
	g := &refGraph{sinks: sinks, declared: map[string]bool{}, refs: map[string][]string{}, sink: map[string]bool{}}
	for _, f := range p.tests {
		for _, d := range f.Decls {
			for _, n := range declNames(d) {
				g.declared[n] = true
			}
		}
	}
	var tests []*ast.FuncDecl
	for _, f := range p.tests {
		ownPath := p.path
		if strings.HasSuffix(f.Name.Name, "_test") {
			ownPath = p.path + "_test"
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body != nil {
					g.add(f, ownPath, d.Name.Name, d.Body)
				}
				if isTest(d) {
					tests = append(tests, d)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							for _, v := range vs.Values {
								g.add(f, ownPath, n.Name, v)
							}
						}
					}
				}
			}
		}
	}
	tc := testCount{dir: p.dir}
	for _, t := range tests {
		tc.tests++
		// Test names are unique and no helper is called Test…, so a Test
		// function's node is its own body.
		if !g.reaches(t.Name.Name, map[string]bool{}) {
			tc.noJoin++
			tc.noJoinNames = append(tc.noJoinNames, t.Name.Name)
		}
	}
	sort.Strings(tc.noJoinNames)
	return tc
}

// declNames are the functions, methods and package-level variables and
// constants a declaration declares.
func declNames(d ast.Decl) []string {
	var ns []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		ns = append(ns, d.Name.Name)
	case *ast.GenDecl:
		for _, s := range d.Specs {
			if vs, ok := s.(*ast.ValueSpec); ok {
				for _, n := range vs.Names {
					ns = append(ns, n.Name)
				}
			}
		}
	}
	return ns
}

// add records what body, part of name's declaration in file f of the
// package ownPath, names.
func (g *refGraph) add(f *ast.File, ownPath, name string, body ast.Node) {
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Obj == nil {
				if path := importOf(f, id.Name); path != "" {
					if g.sinks[path+"."+x.Sel.Name] {
						g.sink[name] = true
					}
					return false
				}
			}
			if g.declared[x.Sel.Name] {
				g.refs[name] = append(g.refs[name], x.Sel.Name)
			}
			ast.Inspect(x.X, visit)
			return false
		case *ast.Ident:
			if g.declared[x.Name] {
				g.refs[name] = append(g.refs[name], x.Name)
			} else if g.sinks[ownPath+"."+x.Name] {
				g.sink[name] = true
			}
		}
		return true
	}
	ast.Inspect(body, visit)
}

// reaches reports whether name names a sink, itself or through the
// names it names.
func (g *refGraph) reaches(name string, seen map[string]bool) bool {
	if g.sink[name] {
		return true
	}
	if seen[name] {
		return false
	}
	seen[name] = true
	for _, ref := range g.refs[name] {
		if g.reaches(ref, seen) {
			g.sink[name] = true // a memo: only a true answer is final
			return true
		}
	}
	return false
}

func (r *report) print(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "%-28s %6s  %-22s %-12s %-9s %s\n", "type", "lines", "fields (with embedded)", "methods(exp)", "mutexes", "declared at")
	for _, t := range r.types {
		fields := strconv.Itoa(t.fields)
		if t.flat != t.fields {
			fields += " (" + strconv.Itoa(t.flat) + ")"
		}
		mu := strconv.Itoa(t.mutexes)
		if t.flatMu != t.mutexes {
			mu += " (" + strconv.Itoa(t.flatMu) + ")"
		}
		fmt.Fprintf(w, "%-28s %6d  %-22s %-12s %-9s %s\n", t.pkg+"."+t.name, t.lines, fields,
			fmt.Sprintf("%d (%d)", t.methods, t.exported), mu, t.pos)
	}
	fmt.Fprintf(w, "\nfiles over %d lines: %d\n", longFile, len(r.longFiles))
	for _, f := range r.longFiles {
		fmt.Fprintf(w, "  %-40s %5d\n", f.name, f.lines)
	}
	fmt.Fprintf(w, "\nfunctions over %d lines: %d\n", longFunc, len(r.longFuncs))
	for _, f := range r.longFuncs {
		fmt.Fprintf(w, "  %-40s %-36s %4d\n", f.name, f.pos, f.lines)
	}
	fmt.Fprintln(w, "\nTest functions that reach no join:")
	for _, tc := range r.tests {
		fmt.Fprintf(w, "  %-20s %d of %d\n", tc.dir, tc.noJoin, tc.tests)
		if verbose {
			for _, n := range tc.noJoinNames {
				fmt.Fprintf(w, "    %s\n", n)
			}
		}
	}
	fmt.Fprintln(w, "\ntotals:")
	over25, mus, maxFlat := 0, 0, 0
	for _, t := range r.types {
		if t.fields > 25 {
			over25++
		}
		mus += t.mutexes
		if t.flat > maxFlat {
			maxFlat = t.flat
		}
	}
	for _, p := range r.pkgs {
		fmt.Fprintf(w, "  %-20s %3d files %6d lines\n", p.dir, len(p.files), p.lines)
	}
	tests, noJoin := 0, 0
	for _, tc := range r.tests {
		tests += tc.tests
		noJoin += tc.noJoin
	}
	fmt.Fprintf(w, "  all: %d lines, %d struct types (%d over 25 fields, most with embedded %d), %d mutex fields, %d funcs, %d over %d lines, %d files over %d lines, %d of %d Test functions reach no join\n",
		r.totalLines, len(r.types), over25, maxFlat, mus, r.funcs, len(r.longFuncs), longFunc, len(r.longFiles), longFile, noJoin, tests)
}
