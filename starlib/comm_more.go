package starlib

import (
	"fmt"
	"math"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"sperli/codes"
	"sperli/runtime"
)

// The calls of SPEC §8.1 beyond the first six collectives: receives that
// tell what they got, probes, sendrecv, allgather, alltoall and
// reduce_scatter.

func envelope(env runtime.Envelope, last string, v starlark.Value) *starlarkstruct.Struct {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"source": starlark.MakeInt(env.Source),
		"tag":    starlark.MakeInt(env.Tag),
		last:     v,
	})
}

func commRecvFrom(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, tag intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "source", &src, "tag", &tag); err != nil {
		return nil, err
	}
	msg, env, err := c.c.RecvFrom(c.ctx, src.n, tag.n)
	if err != nil {
		return nil, refused(err, src, tag)
	}
	return envelope(env, "data", c.received(msg)), nil
}

func commProbe(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, tag intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "source", &src, "tag", &tag); err != nil {
		return nil, err
	}
	env, err := c.c.Probe(c.ctx, src.n, tag.n)
	if err != nil {
		return nil, refused(err, src, tag)
	}
	return envelope(env, "length", starlark.MakeInt(env.Length)), nil
}

func commIprobe(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, tag intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "source", &src, "tag", &tag); err != nil {
		return nil, err
	}
	env, ok, err := c.c.Iprobe(src.n, tag.n)
	if err != nil {
		return nil, refused(err, src, tag)
	}
	if !ok {
		return starlark.None, nil
	}
	return envelope(env, "length", starlark.MakeInt(env.Length)), nil
}

func commSendrecv(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dest, sendtag, src, recvtag intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dest", &dest, "sendtag", &sendtag, "data", &d, "source", &src, "recvtag", &recvtag); err != nil {
		return nil, err
	}
	msg, _, err := c.c.Sendrecv(c.ctx, dest.n, sendtag.n, d, src.n, recvtag.n)
	if err != nil {
		return nil, refused(err, dest, sendtag, src, recvtag)
	}
	return c.received(msg), nil
}

func commAllgather(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "data", &d); err != nil {
		return nil, err
	}
	return c.result(c.c.Allgather(c.ctx, d))
}

func commAlltoall(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "data", &d); err != nil {
		return nil, err
	}
	return c.result(c.c.Alltoall(c.ctx, d))
}

func commReduceScatter(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var typ, op string
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "type", &typ, "op", &op, "data", &d); err != nil {
		return nil, err
	}
	t, o := typeOp(typ, op)
	out, err := c.c.ReduceScatter(c.ctx, t, o, d)
	return c.result(out, namedErr(err, typ, op))
}

func commSplit(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var color, key intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "color", &color, "key?", &key); err != nil {
		return nil, err
	}
	sub, err := c.c.Split(c.ctx, color.n, key.n)
	if err != nil {
		return nil, refused(err, color, key)
	}
	if sub == nil {
		return starlark.None, nil
	}
	return NewComm(c.ctx, sub), nil
}

// commLayout is comm.layout(): this generation's layout (SPEC §10.4) as a
// dict — "generation", "size", "ranks" (the slot of each rank), "spares"
// (live spare slots), "lost" (slots lost since the generation before).
func commLayout(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	l := c.c.Layout()
	ints := func(v []int) *starlark.List {
		out := make([]starlark.Value, len(v))
		for i, x := range v {
			out[i] = starlark.MakeInt(x)
		}
		return starlark.NewList(out)
	}
	d := starlark.NewDict(5)
	d.SetKey(starlark.String("generation"), starlark.MakeInt(l.Gen))
	d.SetKey(starlark.String("size"), starlark.MakeInt(l.Size()))
	d.SetKey(starlark.String("ranks"), ints(l.Ranks()))
	d.SetKey(starlark.String("spares"), ints(l.Spares))
	d.SetKey(starlark.String("lost"), ints(l.Lost))
	return d, nil
}

// Programs that manage losses (SPEC §10.3).

func commSetOnLoss(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var mode string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "mode", &mode); err != nil {
		return nil, err
	}
	var m runtime.LossMode
	switch mode {
	case "return":
		m = runtime.LossReturn
	case "recover":
		m = runtime.LossRecover
	default:
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "set_on_loss", Rank: -1, Msg: fmt.Sprintf("set_on_loss: mode %q, want \"return\" or \"recover\"", mode)}
	}
	return starlark.None, c.c.SetOnLoss(m)
}

func commFailed(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	var out []starlark.Value
	for _, r := range c.c.Failed() {
		out = append(out, starlark.MakeInt(r))
	}
	return starlark.NewList(out), nil
}

func commRevoke(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Revoke()
}

func commAgree(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var flag starlark.Int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "flag", &flag); err != nil {
		return nil, err
	}
	f, ok := flag.Uint64()
	if !ok {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "agree", Rank: -1, Msg: fmt.Sprintf("agree: flag %v, want an int 0 to %d (its bits are ANDed)", flag, uint64(math.MaxUint64))}
	}
	v, err := c.c.Agree(c.ctx, f)
	if err != nil {
		return nil, err
	}
	return starlark.MakeUint64(v), nil
}

func commShrink(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	n, err := c.c.Shrink(c.ctx)
	if err != nil {
		return nil, err
	}
	return NewComm(c.ctx, n), nil
}

func commGrow(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	n, err := c.c.Grow(c.ctx)
	if err != nil {
		return nil, err
	}
	return NewComm(c.ctx, n), nil
}
