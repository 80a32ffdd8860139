package starlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	"go.starlark.net/lib/time"
	"go.starlark.net/starlark"

	"sperli/codes"
	"sperli/runtime"
)

// Program is a rank program to run: a Starlark file, its arguments, where
// its modules are found, and the communicator it sees as comm (nil: no job,
// comm is None).
type Program struct {
	File     string          // path of the .star file
	Args     []string        // sperli.args
	Modules  []string        // more directories to load modules from, after the program's own
	CacheDir string          // compiled-module cache; "" for none
	Stdout   io.Writer       // print goes here; nil is os.Stdout
	Comm     *runtime.Comm   // the job's communicator, or nil
	Context  context.Context // cancels waits and the program; nil is Background
}

// Stdlib are the standard modules a program can load by name: load("json",
// "json") or load("json.star", "json"), likewise math and time.
var Stdlib = map[string]starlark.StringDict{
	"json": {"json": json.Module},
	"math": {"math": math.Module},
	"time": {"time": time.Module},
}

// ProgramError is a failure of the program itself (a syntax or runtime
// error, a failed refusal). Its text is the Starlark backtrace, with
// file:line of every frame; it unwraps to the cause, so the H code of a
// refusal stays visible to codes.As.
type ProgramError struct {
	Text string
	Err  error
}

func (e *ProgramError) Error() string { return e.Text }
func (e *ProgramError) Unwrap() error { return e.Err }

// Run runs the program: its top level, then main() if it defines one. With
// a communicator and no error, it finishes the communicator if the program
// did not (SPEC §14). It does not end the job on error; the caller does
// (runtime.Exit).
func Run(p *Program) error {
	ctx := p.Context
	if ctx == nil {
		ctx = context.Background()
	}
	stdout := p.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	src, err := os.ReadFile(p.File)
	if err != nil {
		return fmt.Errorf("cannot read program: %w", err)
	}
	var commVal starlark.Value = starlark.None
	if p.Comm != nil {
		commVal = NewComm(ctx, p.Comm)
	}
	predeclared := starlark.StringDict{
		"comm":   commVal,
		"sperli": NewSperli(p.Args),
		"array":  Array,
	}
	l := &loader{p: p, predeclared: predeclared, done: map[string]*loadEntry{}}
	thread := &starlark.Thread{
		Name:  "main",
		Print: func(_ *starlark.Thread, msg string) { fmt.Fprintln(stdout, msg) },
		Load:  l.load,
	}
	stop := context.AfterFunc(ctx, func() { thread.Cancel(ctx.Err().Error()) })
	defer stop()

	prog, _, err := Compile(p.File, src, predeclared.Has, p.CacheDir, l.salt())
	if err != nil {
		return &ProgramError{Text: err.Error(), Err: err}
	}
	globals, err := prog.Init(thread, predeclared)
	if err == nil {
		if main, ok := globals["main"]; ok {
			if fn, ok := main.(starlark.Callable); ok {
				_, err = starlark.Call(thread, fn, nil, nil)
			}
		}
	}
	if pending := pendingErr(thread); err == nil && pending != nil {
		// A work queue's iteration ended by it, and nothing raised it.
		return &ProgramError{Text: "a work queue's iteration ended: " + pending.Error(), Err: pending}
	}
	if err != nil {
		return programError(err)
	}
	if p.Comm != nil && !p.Comm.Finished() {
		return p.Comm.Finish()
	}
	return nil
}

func programError(err error) error {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return &ProgramError{Text: strings.TrimRight(ee.Backtrace(), "\n"), Err: err}
	}
	return &ProgramError{Text: err.Error(), Err: err}
}

type loadEntry struct {
	globals starlark.StringDict
	err     error
}

// loader resolves load() of rank programs: the standard modules by name,
// then files relative to the loading program's directory, then each of the
// module directories in order. Each module is run once per program.
type loader struct {
	p           *Program
	predeclared starlark.StringDict
	done        map[string]*loadEntry
}

func (l *loader) salt() string {
	names := make([]string, 0, len(l.predeclared))
	for n := range l.predeclared {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func (l *loader) load(thread *starlark.Thread, module string) (starlark.StringDict, error) {
	if m, ok := Stdlib[strings.TrimSuffix(module, ".star")]; ok {
		return m, nil
	}
	path, err := l.find(thread, module)
	if err != nil {
		return nil, err
	}
	if e, ok := l.done[path]; ok {
		if e == nil {
			return nil, fmt.Errorf("load of %s: cycle of loads", module)
		}
		return e.globals, e.err
	}
	l.done[path] = nil
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var globals starlark.StringDict
	prog, _, err := Compile(path, src, l.predeclared.Has, l.p.CacheDir, l.salt())
	if err == nil {
		t := &starlark.Thread{Name: "load " + module, Print: thread.Print, Load: l.load}
		globals, err = prog.Init(t, l.predeclared)
	}
	l.done[path] = &loadEntry{globals, err}
	return globals, err
}

func (l *loader) find(thread *starlark.Thread, module string) (string, error) {
	if filepath.IsAbs(module) {
		return module, nil
	}
	from := thread.CallFrame(0).Pos.Filename()
	dirs := append([]string{filepath.Dir(from)}, l.p.Modules...)
	for _, d := range dirs {
		path := filepath.Join(d, module)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("load: module %q not found in %s", module, strings.Join(dirs, ", "))
}

var _ = codes.Of
