package starlib

import (
	"errors"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"sperli/codes"
)

// NewSperli returns the module of the predeclared name sperli, the
// program's context (SPEC §14):
//
//	sperli.args                          the program's arguments, a list of strings
//	sperli.attempt(fn, *args, **kwargs)  -> struct(ok, value, code, message)
//
// attempt calls fn; when it fails with a refusal (an error with an H code)
// it returns struct(ok=False, value=None, code="H1618", message="H1618: …")
// instead of failing; when fn returns, struct(ok=True, value=…, code="",
// message=""). A mistake in the program (a wrong type, a wrong number of
// arguments, a failed assertion) is not a refusal and is not caught.
func NewSperli(args []string) *starlarkstruct.Module {
	list := make([]starlark.Value, len(args))
	for i, a := range args {
		list[i] = starlark.String(a)
	}
	l := starlark.NewList(list)
	return &starlarkstruct.Module{
		Name: "sperli",
		Members: starlark.StringDict{
			"args":    l,
			"attempt": starlark.NewBuiltin("sperli.attempt", attempt),
		},
	}
}

func attempt(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 1 {
		return nil, errors.New("sperli.attempt: missing argument fn")
	}
	fn, ok := args[0].(starlark.Callable)
	if !ok {
		return nil, errors.New("sperli.attempt: fn is " + args[0].Type() + ", want a callable")
	}
	v, err := starlark.Call(thread, fn, args[1:], kwargs)
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
