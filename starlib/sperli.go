package starlib

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"sperli/codes"
)

// NewSperli returns the module of the predeclared name sperli, the
// program's context (SPEC §14):
//
//	sperli.args                          the program's arguments, a list of strings
//	sperli.attempt(fn, *args, **kwargs)  -> struct(ok, value, code, message)
//	sperli.read_file(path, binary=False) -> string (bytes with binary=True)
//	sperli.write_file(path, data, append=False)
//	sperli.getenv(name, default=None)    -> string, or default
//	sperli.wtime()                       -> float seconds, monotonic
//	sperli.format(x, digits)             -> x as text with that many decimals
//
// attempt calls fn; when it fails with a refusal (an error with an H code)
// it returns struct(ok=False, value=None, code="H1618", message="H1618: …")
// instead of failing; when fn returns, struct(ok=True, value=…, code="",
// message=""). A mistake in the program (a wrong type, a wrong number of
// arguments, a failed assertion) is not a refusal and is not caught.
//
// read_file and write_file are confined to the rank's working directory
// (the directory it runs in when NewSperli is called): a path is relative
// to it, or absolute below it; a ".." element, an absolute path elsewhere
// and a symbolic link that leads out of it are refused with H1616.
func NewSperli(args []string) *starlarkstruct.Module {
	list := make([]starlark.Value, len(args))
	for i, a := range args {
		list[i] = starlark.String(a)
	}
	l := starlark.NewList(list)
	wd, _ := os.Getwd()
	f := &files{dir: wd}
	return &starlarkstruct.Module{
		Name: "sperli",
		Members: starlark.StringDict{
			"args":       l,
			"attempt":    starlark.NewBuiltin("sperli.attempt", attempt),
			"read_file":  starlark.NewBuiltin("sperli.read_file", f.readFile),
			"write_file": starlark.NewBuiltin("sperli.write_file", f.writeFile),
			"getenv":     starlark.NewBuiltin("sperli.getenv", getenv),
			"wtime":      starlark.NewBuiltin("sperli.wtime", wtime),
			"format":     starlark.NewBuiltin("sperli.format", format),
		},
	}
}

// MaxReadFile is the largest file sperli.read_file reads (1 GiB).
const MaxReadFile = 1 << 30

// files is the rank's working directory for read_file and write_file.
type files struct{ dir string }

// rel turns path into a path relative to the working directory, or
// refuses it.
func (f *files) rel(fn, path string) (string, error) {
	if path == "" {
		return "", codes.New(codes.OutOfRange, "%s: empty path", fn)
	}
	if strings.ContainsRune(path, 0) {
		return "", codes.New(codes.OutOfRange, "%s: %q holds a NUL byte", fn, path)
	}
	for _, el := range strings.Split(filepath.ToSlash(path), "/") {
		if el == ".." {
			return "", codes.New(codes.OutOfRange, "%s: %q has a \"..\" element: a path must stay in the rank's working directory %s", fn, path, f.dir)
		}
	}
	if !filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	for _, dir := range []string{f.dir, evalOr(f.dir)} {
		if r, err := filepath.Rel(dir, filepath.Clean(path)); err == nil && r != ".." && !strings.HasPrefix(r, "../") && !filepath.IsAbs(r) {
			return r, nil
		}
	}
	return "", codes.New(codes.OutOfRange, "%s: %q is outside the rank's working directory %s", fn, path, f.dir)
}

func evalOr(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

// open opens the working directory as an os.Root: every name below it is
// resolved inside it, symbolic links included.
func (f *files) open(fn string) (*os.Root, error) {
	if f.dir == "" {
		return nil, fmt.Errorf("%s: the working directory is unknown", fn)
	}
	r, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	return r, nil
}

// fileErr names a refused escape with its code, other errors as they are.
func (f *files) fileErr(fn, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes") {
		return codes.New(codes.OutOfRange, "%s: %q leads outside the rank's working directory %s (a symbolic link)", fn, path, f.dir)
	}
	return fmt.Errorf("%s: %s: %v", fn, path, err)
}

func (f *files) readFile(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var binary bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "binary?", &binary); err != nil {
		return nil, err
	}
	rel, err := f.rel(b.Name(), path)
	if err != nil {
		return nil, err
	}
	root, err := f.open(b.Name())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	file, err := root.Open(rel)
	if err != nil {
		return nil, f.fileErr(b.Name(), path, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, MaxReadFile+1))
	if err != nil {
		return nil, f.fileErr(b.Name(), path, err)
	}
	if len(data) > MaxReadFile {
		return nil, codes.New(codes.OutOfRange, "%s: %s is over %d bytes", b.Name(), path, MaxReadFile)
	}
	if binary {
		return starlark.Bytes(data), nil
	}
	return starlark.String(data), nil
}

func (f *files) writeFile(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	var data starlark.Value
	var appendTo bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "data", &data, "append?", &appendTo); err != nil {
		return nil, err
	}
	var text string
	switch d := data.(type) {
	case starlark.String:
		text = string(d)
	case starlark.Bytes:
		text = string(d)
	default:
		return nil, fmt.Errorf("%s: data is %s, want string or bytes", b.Name(), data.Type())
	}
	rel, err := f.rel(b.Name(), path)
	if err != nil {
		return nil, err
	}
	root, err := f.open(b.Name())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	file, err := root.OpenFile(rel, flags, 0o644)
	if err != nil {
		return nil, f.fileErr(b.Name(), path, err)
	}
	if _, err := io.WriteString(file, text); err != nil {
		file.Close()
		return nil, f.fileErr(b.Name(), path, err)
	}
	if err := file.Close(); err != nil {
		return nil, f.fileErr(b.Name(), path, err)
	}
	return starlark.None, nil
}

func getenv(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var def starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "default?", &def); err != nil {
		return nil, err
	}
	if v, ok := os.LookupEnv(name); ok {
		return starlark.String(v), nil
	}
	return def, nil
}

// epoch is the start of sperli.wtime's clock (monotonic).
var epoch = time.Now()

func wtime(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.Float(time.Since(epoch).Seconds()), nil
}

// MaxDigits is the most decimals sperli.format gives.
const MaxDigits = 100

func format(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	var digits int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &x, "digits", &digits); err != nil {
		return nil, err
	}
	if digits < 0 || digits > MaxDigits {
		return nil, fmt.Errorf("%s: digits %d, want 0 to %d", b.Name(), digits, MaxDigits)
	}
	var f float64
	switch v := x.(type) {
	case starlark.Float:
		f = float64(v)
	case starlark.Int:
		f = float64(v.Float())
	default:
		return nil, fmt.Errorf("%s: x is %s, want float or int", b.Name(), x.Type())
	}
	return starlark.String(strconv.FormatFloat(f, 'f', digits, 64)), nil
}

func attempt(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 1 {
		return nil, errors.New("sperli.attempt: missing argument fn")
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, errors.New("sperli.attempt: fn is " + args[0].Type() + ", want a callable")
	}
	outer := pendingErr(thread)
	v, err := starlark.Call(thread, fn, args[1:], kwargs)
	if pending := pendingErr(thread); err == nil && pending != nil {
		err = pending // a work queue's iteration ended by it (failKey)
	}
	if outer != nil && !errors.Is(err, outer) {
		// An error left before this call, and not the one it raised.
		thread.SetLocal(failKey, outer)
	}
	if err != nil {
		ce := codes.As(err)
		if ce == nil {
			return nil, err
		}
		return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"ok": starlark.False, "value": starlark.None,
			"code": starlark.String(ce.Code.String()), "message": starlark.String(ce.Error()),
		}), nil
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"ok": starlark.True, "value": v, "code": starlark.String(""), "message": starlark.String(""),
	}), nil
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}
