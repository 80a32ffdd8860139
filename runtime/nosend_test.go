package runtime_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A frame sent while a mutex of the core is held makes every goroutine
// that wants the mutex wait for a peer's credit or a full socket buffer;
// a peer that stops reading then stops this slot too. This test reads the
// package's code (go/types) and fails where a call that sends a frame
// (mesh.Peer's Control, ControlOf, Final, Send, Post, Enqueue, WriteRaw,
// a collective schedule run over a sched.Link, or a function of runtime
// that makes such a call on its own goroutine) is made while a sync.Mutex
// or sync.RWMutex of runtime may be held (Lock seen on some path, no
// Unlock since; `defer Unlock` holds it to the return).
//
// Calls on another goroutine (a go statement) do not count, nor do calls
// through function values and interfaces other than sched.Link: the check
// sees what the code says, not what a value holds at run time.

// callLocks are the mutexes that serialise whole calls rather than guard
// state: a frame sent under one of them waits only for its own call's
// peers, and nothing else takes the mutex meanwhile but the next call of
// the same kind, which would wait anyway.
var callLocks = map[string]string{
	"collState.mu": "one collective call at a time (coll.go): its frames are the call's",
	"core.ckptMu":  "one checkpoint or resume at a time: its rounds are the call's",
}

// queueLocks are the mutexes under which a frame may be queued (Control,
// ControlOf, Final return at once) but not sent by a call that may wait
// for credit or a socket: a connection's arrival lock (peer.fmu) is held
// while its frame is handed up, and what the frame starts (a fin, a relay,
// news) is queued on the links it goes to.
var queueLocks = map[string]string{
	"peer.fmu": "a connection's arrival order: held by its reader while a frame is handed up",
}

// sendsOnMesh are the methods of mesh.Peer that queue or write a frame:
// true for those that may wait (for credit, or on the socket when they
// write from the caller's goroutine).
var sendsOnMesh = map[string]bool{
	"Control": false, "ControlOf": false, "Final": false,
	"Enqueue": false, "Send": true, "Post": true, "WriteRaw": true,
}

func TestNoFrameSentUnderCoreMutex(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// A planted function that breaks the rule in the three ways the
	// check knows, so that a check that finds nothing fails.
	planted, err := parser.ParseFile(fset, "planted.go", plantedSrc, 0)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, planted)
	info := &types.Info{
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Types:      map[ast.Expr]types.TypeAndValue{},
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	tpkg, err := conf.Check("sperli/runtime", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	a := &lockCheck{fset: fset, info: info, pkg: tpkg, decls: map[*types.Func]*ast.FuncDecl{}, senders: map[*types.Func]sends{}}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				a.decls[info.Defs[fd.Name].(*types.Func)] = fd
			}
		}
	}
	a.findSenders()
	if len(a.senders) < 10 {
		// The check is only as good as its list of senders: runtime
		// has dozens; a handful means the resolution broke.
		t.Fatalf("found %d functions that send frames, want dozens: %v", len(a.senders), a.senders)
	}
	for _, fd := range a.decls {
		a.function(fd.Body)
	}
	sort.Strings(a.found)
	var got []string
	for _, f := range a.found {
		if strings.HasPrefix(f, "planted.go:") {
			got = append(got, f[:strings.Index(f, " called")])
			continue
		}
		t.Error(f)
	}
	want := []string{"planted.go:10: c.tell", "planted.go:18: c.finSend", "planted.go:28: p.Post"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("the planted breaks found: %q, want %q", got, want)
	}
}

// plantedSrc breaks the rule: an abort queued under c.mu, through a
// function of runtime under a deferred unlock, and a frame that may wait
// under a connection's arrival lock. The lines under an unlock are fine.
const plantedSrc = `package runtime

import (
	"sperli/runtime/mesh"
	"sperli/wire"
)

func (c *Comm) plantedTell(r wire.Reason) {
	c.mu.Lock()
	c.tell(r)
	c.mu.Unlock()
	c.tell(r)
}

func (c *Comm) plantedFin() {
	c.fin.mu.Lock()
	defer c.fin.mu.Unlock()
	c.finSend(nil, 0)
}

func (p *peer) plantedPost(f *mesh.Frame) {
	p.fmu.Lock()
	if f == nil {
		p.fmu.Unlock()
		p.Post(f)
		return
	}
	p.Post(f)
	p.fmu.Unlock()
	p.Control(0, nil)
}
`

type lockCheck struct {
	fset    *token.FileSet
	info    *types.Info
	pkg     *types.Package
	decls   map[*types.Func]*ast.FuncDecl
	senders map[*types.Func]sends // the calls through which each sends
	found   []string
}

// callee is the function or method a call names, or nil.
func (a *lockCheck) callee(call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fn := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fn
	case *ast.SelectorExpr:
		id = fn.Sel
	case *ast.IndexExpr: // a generic function's instance
		if s, ok := fn.X.(*ast.SelectorExpr); ok {
			id = s.Sel
		} else if i, ok := fn.X.(*ast.Ident); ok {
			id = i
		}
	}
	if id == nil {
		return nil
	}
	f, _ := a.info.Uses[id].(*types.Func)
	return f
}

// sendsDirectly says whether f is one of the calls that send a frame
// outside runtime, and whether it may wait: a mesh.Peer method that
// queues or writes one, the sched.Link's Send, or a schedule of package
// sched run over a Link (both may wait).
func sendsDirectly(f *types.Func) (sends, waits bool) {
	if f.Pkg() == nil {
		return false, false
	}
	sig := f.Type().(*types.Signature)
	switch f.Pkg().Path() {
	case "sperli/runtime/mesh":
		w, ok := sendsOnMesh[f.Name()]
		if sig.Recv() != nil && ok && strings.HasSuffix(types.TypeString(sig.Recv().Type(), nil), "mesh.Peer") {
			return true, w
		}
	case "sperli/runtime/sched":
		if sig.Recv() != nil {
			s := f.Name() == "Send" && strings.HasSuffix(types.TypeString(sig.Recv().Type(), nil), "sched.Link")
			return s, s
		}
		for i := 0; i < sig.Params().Len(); i++ {
			if strings.HasSuffix(sig.Params().At(i).Type().String(), "sched.Link") {
				return true, true
			}
		}
	}
	return false, false
}

// calls visits the calls made on this goroutine by n: not those of go
// statements, nor those in function literals (they run when, and where,
// they are called).
func calls(n ast.Node, visit func(*ast.CallExpr)) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt, *ast.FuncLit:
			return false
		case *ast.CallExpr:
			visit(n)
		}
		return true
	})
}

// sends is what a call of a function does on the caller's goroutine: the
// call through which it sends a frame, and the one through which it may
// wait sending ("" for none).
type sends struct{ any, waits string }

// sendsOf is what calling g does: runtime's functions from findSenders,
// the others from sendsDirectly.
func (a *lockCheck) sendsOf(g *types.Func) sends {
	if s, ok := a.senders[g.Origin()]; ok {
		return s
	}
	var s sends
	if any, waits := sendsDirectly(g); any {
		s.any = g.FullName()
		if waits {
			s.waits = g.FullName()
		}
	}
	return s
}

// chain names the calls from name (a function's full name) down to the
// one outside runtime that sends, or that may wait sending (waits).
func (a *lockCheck) chain(name string, waits bool) string {
	out := name
	for i := 0; i < 64; i++ {
		var next string
		for f, s := range a.senders {
			if f.FullName() == name {
				next = s.any
				if waits {
					next = s.waits
				}
			}
		}
		if next == "" {
			break
		}
		out += " → " + next
		name = next
	}
	return out
}

// findSenders marks every function of runtime that sends a frame on its
// own goroutine, directly or through another, and those that may wait
// sending, to a fixed point.
func (a *lockCheck) findSenders() {
	for changed := true; changed; {
		changed = false
		for f, fd := range a.decls {
			s := a.senders[f]
			calls(fd.Body, func(call *ast.CallExpr) {
				g := a.callee(call)
				if g == nil {
					return
				}
				t := a.sendsOf(g)
				if s.any == "" && t.any != "" {
					s.any, changed = t.any, true
					if g.Pkg() == a.pkg {
						s.any = g.Origin().FullName()
					}
				}
				if s.waits == "" && t.waits != "" {
					s.waits, changed = t.waits, true
					if g.Pkg() == a.pkg {
						s.waits = g.Origin().FullName()
					}
				}
			})
			if s.any != "" {
				a.senders[f] = s
			}
		}
	}
}

// held is the set of mutexes that may be held: the expression that names
// each (c.mu) and its field (Comm.mu).
type held map[string]string

func (h held) copy() held {
	c := held{}
	for k, v := range h {
		c[k] = v
	}
	return c
}

func (h held) union(o held) {
	for k, v := range o {
		h[k] = v
	}
}

// mutexOp says whether call locks or unlocks a mutex of runtime, and
// which: the expression and the field (Type.field).
func (a *lockCheck) mutexOp(call *ast.CallExpr) (op, expr, field string) {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return "", "", ""
	}
	switch sel.Sel.Name {
	case "Lock", "RLock", "Unlock", "RUnlock":
	default:
		return "", "", ""
	}
	tv, ok := a.info.Types[sel.X]
	if !ok {
		return "", "", ""
	}
	ts := types.TypeString(tv.Type, nil)
	if ts != "sync.Mutex" && ts != "sync.RWMutex" && ts != "*sync.Mutex" && ts != "*sync.RWMutex" {
		return "", "", ""
	}
	expr = types.ExprString(sel.X)
	field = expr
	if fs, ok := ast.Unparen(sel.X).(*ast.SelectorExpr); ok {
		if s := a.info.Selections[fs]; s != nil {
			recv := s.Recv()
			if p, ok := recv.(*types.Pointer); ok {
				recv = p.Elem()
			}
			// The field's owner: the struct that declares it, however
			// deep it is embedded.
			owner := recv
			for _, i := range s.Index()[:len(s.Index())-1] {
				st := owner.Underlying().(*types.Struct)
				owner = st.Field(i).Type()
				if p, ok := owner.(*types.Pointer); ok {
					owner = p.Elem()
				}
			}
			field = types.TypeString(owner, func(*types.Package) string { return "" }) + "." + fs.Sel.Name
		}
	}
	if strings.HasPrefix(sel.Sel.Name, "Un") || strings.HasPrefix(sel.Sel.Name, "RUn") {
		return "unlock", expr, field
	}
	return "lock", expr, field
}

// function checks one body from an empty set of mutexes held, and each
// function literal in it the same way.
func (a *lockCheck) function(body *ast.BlockStmt) {
	a.block(body.List, held{})
	ast.Inspect(body, func(n ast.Node) bool {
		if fl, ok := n.(*ast.FuncLit); ok {
			a.block(fl.Body.List, held{})
		}
		return true
	})
}

// block walks statements in order and returns the mutexes that may be
// held after them, and whether every path through them ends (return,
// panic).
func (a *lockCheck) block(list []ast.Stmt, h held) (held, bool) {
	for _, s := range list {
		var ends bool
		h, ends = a.stmt(s, h)
		if ends {
			return h, true
		}
	}
	return h, false
}

func (a *lockCheck) stmt(s ast.Stmt, h held) (held, bool) {
	switch s := s.(type) {
	case *ast.BlockStmt:
		return a.block(s.List, h)
	case *ast.IfStmt:
		if s.Init != nil {
			h, _ = a.stmt(s.Init, h)
		}
		a.exprs(s.Cond, h)
		then, thenEnds := a.block(s.Body.List, h.copy())
		els, elsEnds := h, false
		if s.Else != nil {
			els, elsEnds = a.stmt(s.Else, h.copy())
		}
		return merge([]held{then, els}, []bool{thenEnds, elsEnds})
	case *ast.ForStmt:
		if s.Init != nil {
			h, _ = a.stmt(s.Init, h)
		}
		if s.Cond != nil {
			a.exprs(s.Cond, h)
		}
		body, _ := a.block(s.Body.List, h.copy())
		out := h.copy()
		out.union(body)
		return out, false
	case *ast.RangeStmt:
		a.exprs(s.X, h)
		body, _ := a.block(s.Body.List, h.copy())
		out := h.copy()
		out.union(body)
		return out, false
	case *ast.SwitchStmt:
		if s.Init != nil {
			h, _ = a.stmt(s.Init, h)
		}
		if s.Tag != nil {
			a.exprs(s.Tag, h)
		}
		return a.clauses(s.Body, h)
	case *ast.TypeSwitchStmt:
		if s.Init != nil {
			h, _ = a.stmt(s.Init, h)
		}
		a.exprs(s.Assign, h)
		return a.clauses(s.Body, h)
	case *ast.SelectStmt:
		return a.clauses(s.Body, h)
	case *ast.LabeledStmt:
		return a.stmt(s.Stmt, h)
	case *ast.ReturnStmt:
		for _, r := range s.Results {
			a.exprs(r, h)
		}
		return h, true
	case *ast.GoStmt:
		return h, false
	case *ast.DeferStmt:
		// defer mu.Unlock() keeps mu held to the return; a deferred call
		// that sends runs at the return, where the state is unknown here.
		return h, false
	case *ast.ExprStmt:
		if call, ok := s.X.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
				a.exprs(call, h)
				return h, true
			}
		}
	}
	a.exprs(s, h)
	return h, false
}

func (a *lockCheck) clauses(body *ast.BlockStmt, h held) (held, bool) {
	var outs []held
	var ends []bool
	hasDefault := false
	for _, c := range body.List {
		var list []ast.Stmt
		switch c := c.(type) {
		case *ast.CaseClause:
			for _, e := range c.List {
				a.exprs(e, h)
			}
			list, hasDefault = c.Body, hasDefault || c.List == nil
		case *ast.CommClause:
			hc := h.copy()
			if c.Comm != nil {
				hc, _ = a.stmt(c.Comm, hc)
			}
			o, e := a.block(c.Body, hc)
			outs, ends = append(outs, o), append(ends, e)
			hasDefault = hasDefault || c.Comm == nil
			continue
		}
		o, e := a.block(list, h.copy())
		outs, ends = append(outs, o), append(ends, e)
	}
	if !hasDefault {
		outs, ends = append(outs, h), append(ends, false)
	}
	return merge(outs, ends)
}

// merge is the state after branches: what may be held on any path that
// goes on.
func merge(outs []held, ends []bool) (held, bool) {
	out, all := held{}, true
	for i, o := range outs {
		if !ends[i] {
			out.union(o)
			all = false
		}
	}
	return out, all
}

// exprs checks the calls of one statement or expression in order,
// updating h with its Lock and Unlock calls.
func (a *lockCheck) exprs(n ast.Node, h held) {
	calls(n, func(call *ast.CallExpr) {
		switch op, expr, field := a.mutexOp(call); op {
		case "lock":
			h[expr] = field
			return
		case "unlock":
			delete(h, expr)
			return
		}
		g := a.callee(call)
		if g == nil {
			return
		}
		s := a.sendsOf(g)
		if s.any == "" {
			return
		}
		for expr, field := range h {
			why := a.chain(s.any, false)
			if _, ok := callLocks[field]; ok {
				continue
			}
			if _, ok := queueLocks[field]; ok {
				if s.waits == "" {
					continue
				}
				why = a.chain(s.waits, true) + ", which may wait"
			}
			pos := a.fset.Position(call.Pos())
			a.found = append(a.found, fmt.Sprintf("%s:%d: %s called with %s (%s) held: it sends a frame (through %s)",
				filepath.Base(pos.Filename), pos.Line, types.ExprString(call.Fun), expr, field, why))
		}
	})
}
