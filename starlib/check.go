package starlib

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/syntax"
)

// predeclaredNames are the names every rank program is given besides
// starlark.Universe (Run).
var predeclaredNames = []string{"array", "comm", "sperli"}

// Check compiles the program file and, through its load statements, every
// module it loads that is a file, as a rank would (the standard modules by
// name; a file relative to the loading file's directory, then each of
// modules in order), without running any. It returns the first syntax or
// resolve error, whose text begins file:line:col, or a load of a module
// that is not found, named by the load statement's position. The launcher
// calls it before any rank starts (SPEC §2), so a program that cannot run
// is one message, not one per rank.
func Check(file string, modules []string) error {
	c := &checker{modules: modules, done: map[string]bool{}}
	return c.check(file)
}

type checker struct {
	modules []string
	done    map[string]bool
}

func (c *checker) check(path string) error {
	if c.done[path] {
		return nil
	}
	c.done[path] = true
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrapPathErr(err))
	}
	f, err := FileOptions.Parse(path, src, 0)
	if err != nil {
		return err
	}
	has := func(name string) bool {
		i := sort.SearchStrings(predeclaredNames, name)
		return i < len(predeclaredNames) && predeclaredNames[i] == name
	}
	if _, _, err := Compile(path, src, has, "", strings.Join(predeclaredNames, ",")); err != nil {
		if list, ok := err.(resolve.ErrorList); ok && len(list) > 1 {
			return fmt.Errorf("%v (and %d more)", list[0], len(list)-1)
		}
		return err
	}
	for _, stmt := range f.Stmts {
		load, ok := stmt.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		module := load.ModuleName()
		if _, ok := Stdlib[strings.TrimSuffix(module, ".star")]; ok {
			continue
		}
		dirs := append([]string{filepath.Dir(path)}, c.modules...)
		found := ""
		if filepath.IsAbs(module) {
			found = module
		} else {
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Join(d, module)); err == nil {
					found = filepath.Join(d, module)
					break
				}
			}
		}
		if found == "" {
			return fmt.Errorf("%s: load: module %q not found in %s", load.Module.TokenPos, module, strings.Join(dirs, ", "))
		}
		if err := c.check(found); err != nil {
			return err
		}
	}
	return nil
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
