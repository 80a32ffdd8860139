package starlib

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"go.starlark.net/starlark"

	"sperli/codes"
	"sperli/runtime"
)

// Comm is the Starlark value of the predeclared name comm: the job's
// communicator (SPEC §14). Its methods:
//
//	comm.rank, comm.size, comm.job, comm.incarnation
//	comm.send(dest, tag, data)              data: bytes or string; returns None
//	comm.recv(source, tag)                  -> bytes
//	op = comm.start_send(dest, tag, data);  comm.finish_send(op)
//	op = comm.start_recv(source, tag);      data = comm.finish_recv(op)
//	comm.barrier()
//	comm.bcast(root, data)                  -> bytes
//	comm.reduce(root, type, op, data)       -> bytes (empty off the root)
//	comm.allreduce(type, op, data)          -> bytes
//	comm.gather(root, data)                 -> bytes (empty off the root)
//	comm.scatter(root, data)                -> bytes
//	comm.set_silence(ms); comm.heartbeat(); comm.abort(); comm.finish()
//	comm.use_checkpoints(dir=None)          dir relative to the working directory; None: --checkpoint-dir
//	comm.checkpoint(state)                  state: bytes or string; returns when the COMMIT is stored
//	comm.resume()                           -> bytes of the newest committed state, or None on a fresh start
//	comm.recv_from(source, tag)             -> struct(source, tag, data); source comm.ANY_SOURCE, tag comm.ANY_TAG
//	comm.probe(source, tag)                 -> struct(source, tag, length), waiting; comm.iprobe: the same or None
//	comm.sendrecv(dest, sendtag, data, source, recvtag) -> bytes (a ring shift never deadlocks)
//	comm.allgather(data)                    -> bytes: every rank's data in rank order
//	comm.alltoall(data)                     -> bytes: block i of rank j's data is block j of rank i's result
//	comm.reduce_scatter(type, op, data)     -> bytes: block rank of the reduction
//	comm.split(color, key=0)                -> a communicator of the ranks of that color, ordered by key; None for color -1
//
// recv and start_recv take the wildcards too (MPI's MPI_ANY_SOURCE and
// MPI_ANY_TAG, both -1); recv_from tells what came. -1 is the wildcard of
// every receive and probe, and refused in a send; any other rank or tag out
// of range, however large, is H1616 before the call sends or waits.
//
// A refusal is a Starlark error whose message starts with its code
// ("H1616: send: rank 5 is outside the job (size 3)"); sperli.attempt turns
// it into a value.
type Comm struct {
	c   *runtime.Comm
	ctx context.Context
}

// NewComm wraps a joined communicator for Starlark; ctx cancels its waits.
func NewComm(ctx context.Context, c *runtime.Comm) *Comm { return &Comm{c: c, ctx: ctx} }

var (
	_ starlark.HasAttrs = (*Comm)(nil)
	_ starlark.Value    = (*Op)(nil)
)

func (c *Comm) String() string        { return fmt.Sprintf("<comm rank %d of %d>", c.c.Rank(), c.c.Size()) }
func (c *Comm) Type() string          { return "comm" }
func (c *Comm) Freeze()               {}
func (c *Comm) Truth() starlark.Bool  { return starlark.True }
func (c *Comm) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: comm") }

type commMethod func(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error)

var commMethods = map[string]commMethod{
	"send":        commSend,
	"recv":        commRecv,
	"start_send":  commStartSend,
	"finish_send": commFinishSend,
	"start_recv":  commStartRecv,
	"finish_recv": commFinishRecv,
	"barrier":     commBarrier,
	"bcast":       commBcast,
	"reduce":      commReduce,
	"allreduce":   commAllreduce,
	"gather":      commGather,
	"scatter":     commScatter,
	"set_silence": commSetSilence,
	"heartbeat":   commHeartbeat,
	"abort":       commAbort,
	"finish":      commFinish,

	"use_checkpoints": commUseCheckpoints,
	"checkpoint":      commCheckpoint,
	"resume":          commResume,

	"recv_from":      commRecvFrom,
	"probe":          commProbe,
	"iprobe":         commIprobe,
	"sendrecv":       commSendrecv,
	"allgather":      commAllgather,
	"alltoall":       commAlltoall,
	"reduce_scatter": commReduceScatter,
	"split":          commSplit,
	"layout":         commLayout,
	"set_on_loss":    commSetOnLoss,
	"failed":         commFailed,
	"revoke":         commRevoke,
	"agree":          commAgree,
	"shrink":         commShrink,
	"grow":           commGrow,
}

// Attr returns a field or a bound method.
func (c *Comm) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rank":
		return starlark.MakeInt(c.c.Rank()), nil
	case "size":
		return starlark.MakeInt(c.c.Size()), nil
	case "job":
		return starlark.String(c.c.JobID()), nil
	case "incarnation", "generation":
		return starlark.MakeUint64(uint64(c.c.Incarnation())), nil
	case "slot":
		return starlark.MakeInt(c.c.Slot()), nil
	case "ANY_SOURCE":
		return starlark.MakeInt(runtime.AnySource), nil
	case "ANY_TAG":
		return starlark.MakeInt(runtime.AnyTag), nil
	}
	if name == "work_queue" { // its iterator needs the thread (failKey)
		return starlark.NewBuiltin("comm.work_queue", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			return commWorkQueue(c, thread, b, args, kwargs)
		}), nil
	}
	m, ok := commMethods[name]
	if !ok {
		return nil, nil
	}
	return starlark.NewBuiltin("comm."+name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return m(c, b, args, kwargs)
	}), nil
}

// AttrNames lists the fields and methods.
func (c *Comm) AttrNames() []string {
	names := []string{"rank", "size", "job", "incarnation", "generation", "slot", "ANY_SOURCE", "ANY_TAG", "work_queue"}
	for n := range commMethods {
		names = append(names, n)
	}
	return sortedStrings(names)
}

// Op is an open operation made by comm.start_send or comm.start_recv.
type Op struct {
	send *runtime.SendOp
	recv *runtime.RecvOp
	desc string
}

func (o *Op) String() string        { return "<comm.op " + o.desc + ">" }
func (o *Op) Type() string          { return "comm.op" }
func (o *Op) Freeze()               {}
func (o *Op) Truth() starlark.Bool  { return starlark.True }
func (o *Op) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: comm.op") }

// stringOf is the text of a bytes or string argument.
func stringOf(v starlark.Value) (string, error) {
	switch x := v.(type) {
	case starlark.Bytes:
		return string(x), nil
	case starlark.String:
		return string(x), nil
	}
	return "", fmt.Errorf("got %s, want bytes or string", v.Type())
}

// data is an argument that takes bytes or a string, as a copy the runtime
// may own (collectives, checkpoints).
type data []byte

func (d *data) Unpack(v starlark.Value) error {
	s, err := stringOf(v)
	*d = []byte(s)
	return err
}

// sendData is a message to send: the bytes of the Starlark string itself,
// not a copy. A send only reads its buffer, and Starlark strings never
// change, so sharing is safe (received messages are never released for
// reuse in starlib, so a send to this rank may share too).
type sendData []byte

func (d *sendData) Unpack(v starlark.Value) error {
	s, err := stringOf(v)
	*d = unsafe.Slice(unsafe.StringData(s), len(s))
	return err
}

// intArg is an int argument of any size: a rank, tag, root, color, key or
// number of milliseconds. One that does not fit a Go int (2**63; Sperli
// builds only where int is 64 bits) is passed to the runtime as the nearest
// int, which is outside every range the runtime admits, so it is refused
// as 2**31 is — H1616, or for a collective H1618 on every rank with the
// job going on (SPEC §8.3) — not as a program error on one rank while the
// others wait in the call. refused puts the number the program wrote back
// into the message.
type intArg struct {
	n    int
	text string // the value as written, when n is not it
}

func (a *intArg) Unpack(v starlark.Value) error {
	i, ok := v.(starlark.Int)
	if !ok {
		return fmt.Errorf("got %s, want int", v.Type())
	}
	if x, ok := i.Int64(); ok && int64(int(x)) == x {
		*a = intArg{n: int(x)}
		return nil
	}
	*a = intArg{n: math.MaxInt, text: i.String()}
	if i.BigInt().Sign() < 0 {
		a.n = math.MinInt
	}
	return nil
}

// refused is the refusal err with the arguments that did not fit an int
// named as written. The runtime refuses the first wrong argument in order,
// so the first that did not fit takes the first place its stand-in is named.
func refused(err error, args ...intArg) error {
	e, ok := err.(*codes.Error)
	if !ok {
		return err
	}
	msg := e.Msg
	for _, a := range args {
		if a.text != "" {
			msg = strings.Replace(msg, strconv.Itoa(a.n), a.text, 1)
		}
	}
	if msg == e.Msg {
		return err
	}
	named := *e
	named.Msg = msg
	return &named
}

func commSend(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dest, tag intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dest", &dest, "tag", &tag, "data", &d); err != nil {
		return nil, err
	}
	return starlark.None, refused(c.c.Send(c.ctx, dest.n, tag.n, d), dest, tag)
}

func commRecv(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, tag intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "source", &src, "tag", &tag); err != nil {
		return nil, err
	}
	msg, err := c.c.Recv(c.ctx, src.n, tag.n)
	if err != nil {
		return nil, refused(err, src, tag)
	}
	return c.received(msg), nil
}

// received is a message as a Starlark value, without a copy: the buffer is
// the caller's once Recv returns and nothing writes to it again, so it can
// be the immutable bytes of the value (a copy and Release would allocate
// the same megabyte for the value and move it once more).
func (c *Comm) received(msg []byte) starlark.Value {
	if len(msg) == 0 {
		return starlark.Bytes("")
	}
	return starlark.Bytes(unsafe.String(&msg[0], len(msg)))
}

func commStartSend(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dest, tag intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dest", &dest, "tag", &tag, "data", &d); err != nil {
		return nil, err
	}
	op, err := c.c.StartSend(dest.n, tag.n, d)
	if err != nil {
		return nil, refused(err, dest, tag)
	}
	return &Op{send: op, desc: fmt.Sprintf("send to %d tag %d", dest.n, tag.n)}, nil
}

func unpackOp(b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (*Op, error) {
	var op *Op
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "op", &op); err != nil {
		return nil, err
	}
	return op, nil
}

func commFinishSend(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	op, err := unpackOp(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	if op.send == nil {
		return nil, fmt.Errorf("%s: %s is a receive, want a send", b.Name(), op.desc)
	}
	return starlark.None, c.c.FinishSend(c.ctx, op.send)
}

func commStartRecv(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src, tag intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "source", &src, "tag", &tag); err != nil {
		return nil, err
	}
	op, err := c.c.StartRecv(src.n, tag.n)
	if err != nil {
		return nil, refused(err, src, tag)
	}
	return &Op{recv: op, desc: fmt.Sprintf("recv from %d tag %d", src.n, tag.n)}, nil
}

func commFinishRecv(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	op, err := unpackOp(b, args, kwargs)
	if err != nil {
		return nil, err
	}
	if op.recv == nil {
		return nil, fmt.Errorf("%s: %s is a send, want a receive", b.Name(), op.desc)
	}
	msg, err := c.c.FinishRecv(c.ctx, op.recv)
	if err != nil {
		return nil, err
	}
	return c.received(msg), nil
}

func commBarrier(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Barrier(c.ctx)
}

// result is a collective's result as a Starlark value, without a copy (as
// received): the call returns new bytes that nothing writes to again.
func (c *Comm) result(out []byte, err error) (starlark.Value, error) {
	if err != nil {
		return nil, err
	}
	return c.received(out), nil
}

func commBcast(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var root intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "root", &root, "data?", &d); err != nil {
		return nil, err
	}
	out, err := c.c.Bcast(c.ctx, root.n, d)
	return c.result(out, refused(err, root))
}

func commGather(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var root intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "root", &root, "data", &d); err != nil {
		return nil, err
	}
	out, err := c.c.Gather(c.ctx, root.n, d)
	return c.result(out, refused(err, root))
}

func commScatter(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var root intArg
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "root", &root, "data?", &d); err != nil {
		return nil, err
	}
	out, err := c.c.Scatter(c.ctx, root.n, d)
	return c.result(out, refused(err, root))
}

// typeOp reads a type and a reduction name. An unknown name is still a
// call every rank must make: it reaches the runtime as an unknown number,
// which voids the call (H1618) on every rank alike.
func typeOp(typ, op string) (runtime.Type, runtime.Op) {
	t, ok := runtime.ParseType(typ)
	if !ok {
		t = 255
	}
	o, ok := runtime.ParseOp(op)
	if !ok {
		o = 255
	}
	return t, o
}

func commReduce(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var root intArg
	var typ, op string
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "root", &root, "type", &typ, "op", &op, "data", &d); err != nil {
		return nil, err
	}
	t, o := typeOp(typ, op)
	out, err := c.c.Reduce(c.ctx, root.n, t, o, d)
	return c.result(out, namedErr(refused(err, root), typ, op))
}

func commAllreduce(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var typ, op string
	var d sendData
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "type", &typ, "op", &op, "data", &d); err != nil {
		return nil, err
	}
	t, o := typeOp(typ, op)
	out, err := c.c.Allreduce(c.ctx, t, o, d)
	return c.result(out, namedErr(err, typ, op))
}

// namedErr puts the names the program used into an H1618 for an unknown
// type or reduction.
func namedErr(err error, typ, op string) error {
	e := codes.As(err)
	if e == nil || e.Code != codes.WrongCollective {
		return err
	}
	if _, ok := runtime.ParseType(typ); !ok {
		return &codes.Error{Code: e.Code, Rank: -1, Msg: fmt.Sprintf("unknown element type %q (want one of bytes, int32, int64, uint32, uint64, float32, float64)", typ), Err: err}
	}
	if _, ok := runtime.ParseOp(op); !ok {
		return &codes.Error{Code: e.Code, Rank: -1, Msg: fmt.Sprintf("unknown reduction %q (want one of sum, prod, min, max, land, lor, lxor, band, bor, bxor)", op), Err: err}
	}
	return err
}

func commSetSilence(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var ms intArg
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "ms", &ms); err != nil {
		return nil, err
	}
	return starlark.None, refused(c.c.SetSilence(ms.n), ms)
}

func commHeartbeat(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Heartbeat()
}

func commAbort(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Abort()
}

func commFinish(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Finish()
}

func commUseCheckpoints(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dir starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dir?", &dir); err != nil {
		return nil, err
	}
	d := ""
	switch x := dir.(type) {
	case starlark.NoneType:
	case starlark.String:
		d = string(x)
	default:
		return nil, fmt.Errorf("%s: dir is %s, want a string or None", b.Name(), dir.Type())
	}
	return starlark.None, c.c.UseCheckpoints(d)
}

func commCheckpoint(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var d data
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "state", &d); err != nil {
		return nil, err
	}
	return starlark.None, c.c.Checkpoint(c.ctx, d)
}

func commResume(c *Comm, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	state, ok, err := c.c.Resume(c.ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return starlark.None, nil
	}
	return starlark.Bytes(state), nil
}
