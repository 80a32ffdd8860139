/*
 * sperli.h — libsperli, the C library of Sperli (SPEC §12).
 *
 * A C program (or Fortran, Rust, Python's ctypes… through C) joins a Sperli
 * job as a rank like any other: the same wire, the same mutual TLS 1.3, the
 * same certificates and join tokens as the Go and Starlark ranks, because
 * the library *is* the Go runtime (runtime/), built as a C archive, with a C
 * layer (sperli.c) in front that checks every argument.
 *
 * Build and link (docs/c.md has more):
 *
 *     sh scripts/libsperli/build.sh       # writes libsperli/c/<target>/
 *     cc -I libsperli/c/linux prog.c libsperli/c/linux/libsperli.a -lpthread -o prog
 *     sperli run -n 3 ./prog              # or: ./prog < rank-1.job
 *
 * Link flags by target: linux needs -lpthread and nothing else (no -ldl,
 * -lm or -lresolv: TLS, the certificates and the job key are inside the
 * archive; with glibc 2.34 or later -lpthread is even empty, but keep it).
 * Not checked on a machine here: freebsd and openbsd should need -lpthread
 * only, darwin "-framework CoreFoundation -framework Security" as well (what
 * the Go TLS stack links on macOS).
 *
 * ---------------------------------------------------------------------------
 * The model
 *
 * - A program reads its job description, the first line of its standard
 *   input, and joins with sperli_init (it read the line itself) or
 *   sperli_init_stdin (the library reads it). The rest of standard input is
 *   the launcher's control channel: the library watches it, the program must
 *   not read standard input.
 * - The session is a number (sperli_t), not a pointer. A process holds one
 *   session at a time. sperli_finish, sperli_abort and sperli_exit end it;
 *   its handle is then no longer valid (SPERLI_E_HANDLE), and a new
 *   sperli_init may open another session (with another handle).
 * - Communicators: the session's handle is also its world communicator
 *   (MPI_COMM_WORLD: every rank of the job). sperli_split makes more, each
 *   a number of the same type (sperli_t) with its own ranks, size, tags and
 *   collective sequence. Every function whose first argument is named comm
 *   takes either: the session or a communicator made by sperli_split (not
 *   freed). The six functions that end the session or checkpoint the job
 *   (sperli_finish, sperli_abort, sperli_exit, sperli_use_checkpoints,
 *   sperli_checkpoint, sperli_resume) take the session only, and answer
 *   SPERLI_E_COMM for a communicator made by split. sperli_comm_free ends a
 *   communicator made by split (SPERLI_E_COMM afterwards); all of them end
 *   with the session. Handles are never reused: no session or communicator
 *   handle is ever given twice.
 * - Ranks, sources and destinations are ranks of the communicator named.
 *   A receive or probe may name SPERLI_ANY_SOURCE and SPERLI_ANY_TAG.
 * - One call at a time: a function called while another function of the
 *   library runs (in another thread) returns SPERLI_E_BUSY at once and does
 *   nothing. Only sperli_strerror may be called at any time.
 * - Waiting: a receive polls its socket for up to SPERLI_SPIN_US
 *   microseconds (environment; default 1000, 0 when the host runs more
 *   ranks than it has processors; 0 never spins) before it blocks. While
 *   reads spin, the calls that wait (recv, finish_send, finish_recv, the
 *   collectives, finish, checkpoint, resume) run on the calling thread;
 *   otherwise, and for init, they run on the library's own thread and the
 *   calling thread waits, spinning first for up to SPERLI_SPIN_US while
 *   yielding the processor, then sleeping (docs/c.md §7). The library uses
 *   the Go runtime's threads; it is not usable in the child of a fork(2):
 *   there every function (but sperli_strerror) answers SPERLI_E_FORK and
 *   does nothing (the parent's session goes on untouched; fork and exec is
 *   fine).
 * - Cancellation: every function (but sperli_strerror) disables the
 *   calling thread's cancellation (pthread_setcancelstate) for as long as
 *   it runs. A pthread_cancel of a thread that waits in a call does not cut
 *   the call short: the call runs to its end (a receive until its message
 *   comes or the job ends), and the cancellation takes effect at the
 *   thread's first cancellation point after it has returned.
 * - Every function returns a code (int): 0 when it did what it says, a
 *   negative SPERLI_E_* code for a mistake of the caller — then it did
 *   nothing at all: no byte was sent, the job goes on, every out argument is
 *   untouched unless its text says otherwise, and the same call with right
 *   arguments may follow — or 1601 … 1628, the number of a refusal Hnnnn of
 *   the job (SPEC §13, docs/errors.md; sperli_strerror gives its text,
 *   sperli_last_error the message of the last one). Two exceptions:
 *   SPERLI_E_RECOVERED (-17) is no mistake of the caller but the news that
 *   the job recovered from a loss in place (see "Recovery"), and
 *   SPERLI_NOT_NEEDED (1) is init's answer to a spare the job did not need.
 * - A wrong argument never ends the process. Only a broken promise of the
 *   library itself ends it, with abort(3) after one line on standard error
 *   ("libsperli: broken promise, aborting: …"). No Go panic crosses into C.
 * - Calls that make data (recv, recv_from, finish_recv, finish_recv_from,
 *   sendrecv, bcast, reduce, allreduce, gather, scatter, allgather,
 *   alltoall, reduce_scatter, resume) keep their result in the session
 *   and tell its length; sperli_result copies it out. The result stays until the next
 *   call that makes data, or the end of the session; a call that makes data
 *   and answers a refusal (a positive code) leaves an empty result; one that
 *   answers a negative code (SPERLI_E_FINISHED too) leaves the earlier
 *   result and its own out arguments untouched.
 * - Buffers given to the library are only read during the call: when a call
 *   returns, the buffer is the caller's again (sperli_start_send copies).
 * - Once the job has ended (a rank was lost, another rank ended it, this
 *   rank saw a mismatch), every call that uses the job answers the code it
 *   ended with: H1608 or H1609 (a peer sent a bad frame), H1611 (this rank
 *   saw a peer lost), H1612 (another rank ended the job), H1613 (this rank
 *   saw a collective mismatch). End with sperli_exit, which turns it into
 *   the exit status (75 for a loss, else 1).
 * - Recovery (SPEC §10.2; docs/c.md "Recovery"): in a job with spares
 *   (sperli run --spares S) a loss does not end the job. The call a rank is
 *   in — or its next call that uses the job — waits until the live slots
 *   have agreed on the next generation, and answers SPERLI_E_RECOVERED: the
 *   same session handle is now the next generation's world. The program
 *   calls sperli_resume and goes on from the newest committed state (from
 *   its start when there is none). A spare waits in sperli_init until it
 *   takes a lost rank's place (init answers 0: the program runs as that
 *   rank, calls sperli_resume) or until the job finished without it
 *   (SPERLI_NOT_NEEDED). With no spare left the job ends as without
 *   recovery (H1611; the launcher may restart it).
 * - In a job with spares, or after SPERLI_LOSS_RETURN, sperli_send and
 *   sperli_sendrecv copy the message (a send cut short by a loss may leave
 *   its frame on a connection the next generation keeps).
 *
 * Codes common to all functions below, not repeated in each: SPERLI_E_FORK
 * (in the child of a fork(2): checked before everything), SPERLI_E_BUSY
 * (checked first otherwise), SPERLI_E_HANDLE and SPERLI_E_COMM (checked
 * next, for every function that takes a session or communicator), and the
 * job's end codes just listed and SPERLI_E_RECOVERED (for every function
 * that uses the job). Arguments are checked in the order they are listed;
 * the first wrong one gives the code.
 */
#ifndef SPERLI_H
#define SPERLI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPERLI_VERSION 1

/* A session: the program's place in a joined job. Valid handles are > 0. */
typedef int sperli_t;

/* SPERLI_NONE: no session (for sperli_exit when init failed or the session
 * was ended by sperli_finish or sperli_abort). */
#define SPERLI_NONE 0

/* An open send or receive (sperli_start_send, sperli_start_recv). Valid
 * handles are > 0; each is finished exactly once. */
typedef int64_t sperli_op;

/* What a loss does (sperli_set_on_loss). */
#define SPERLI_LOSS_RECOVER 0 /* the default: in place with spares, else the job ends */
#define SPERLI_LOSS_RETURN 1  /* the program manages its losses (ULFM) */

/* Wildcards of a receive or probe (MPI_ANY_SOURCE, MPI_ANY_TAG): a
 * message from any rank of the communicator, of any tag. */
#define SPERLI_ANY_SOURCE (-1)
#define SPERLI_ANY_TAG (-1)

/* The color of sperli_split that joins no new communicator (MPI_UNDEFINED):
 * the rank gets SPERLI_NONE. */
#define SPERLI_UNDEFINED (-1)

/* What a receive or probe got (MPI_Status): the message's source (its rank
 * in the communicator of the call), its tag, and its length in bytes. */
typedef struct {
    int source;
    int tag;
    size_t len;
} sperli_status;

/* ------------------------------------------------------------------------
 * Codes. Stable: numbers are never reused and only appended. The same table
 * is in docs/errors.md and docs/c.md.
 */
#define SPERLI_OK 0

/* A pointer argument that must point somewhere is NULL. */
#define SPERLI_E_NULL (-1)
/* A length outside its range: a message over SPERLI_MAX_MESSAGE bytes, a
 * job description line over SPERLI_MAX_JOB_LINE bytes, a checkpoint state
 * over SPERLI_MAX_CHECKPOINT bytes, or a buffer shorter than what it must
 * hold (sperli_result, sperli_last_error: the length needed is told;
 * sperli_job: 33 bytes needed). */
#define SPERLI_E_LENGTH (-2)
/* A rank of a point-to-point call outside its communicator: not 0 …
 * size-1 (nor SPERLI_ANY_SOURCE where a receive or probe takes it).
 * (A collective's root outside the job is no negative code: it is H1618 on
 * every rank, SPEC §8.3.) */
#define SPERLI_E_RANK (-3)
/* A tag outside 0 … SPERLI_MAX_TAG (2,147,483,647). */
#define SPERLI_E_TAG (-4)
/* An element type that is none of SPERLI_BYTES … SPERLI_FLOAT64. */
#define SPERLI_E_TYPE (-5)
/* A reduction that is none of SPERLI_SUM … SPERLI_BXOR. (A known reduction
 * that does not fit the type, band on float64, is H1618 on every rank.) */
#define SPERLI_E_OP (-6)
/* A count outside its range: the milliseconds of sperli_set_silence, which
 * must be SPERLI_MIN_SILENCE_MS … SPERLI_MAX_SILENCE_MS. */
#define SPERLI_E_COUNT (-7)
/* A handle that is neither the open session nor a communicator of it:
 * never given by sperli_init or sperli_split, made up, or of a session
 * ended by sperli_finish, sperli_abort or sperli_exit (its communicators
 * too). */
#define SPERLI_E_HANDLE (-8)
/* A path that cannot be one: longer than SPERLI_MAX_PATH bytes. */
#define SPERLI_E_PATH (-9)
/* Another call of the library is running (in another thread). Nothing was
 * done; call again when it has returned. */
#define SPERLI_E_BUSY (-10)
/* An operation handle that is not an open operation of this session of the
 * kind the function finishes: finished already, a receive given to
 * sperli_finish_send (or a send to sperli_finish_recv), of an ended
 * session, or made up. (H1617 in Go and Starlark.) */
#define SPERLI_E_OPERATION (-11)
/* The rank named has finished (said bye): a send to it, or a receive from
 * it with no message kept, can never complete. The job goes on. (H1617 in
 * Go and Starlark.) */
#define SPERLI_E_FINISHED (-12)
/* sperli_finish while operations are still open: finish them first (or
 * end with sperli_abort or sperli_exit). (H1617 in Go and Starlark.) */
#define SPERLI_E_OPEN (-13)
/* sperli_init while a session is open: a process holds one session. */
#define SPERLI_E_SESSION (-14)
/* Called in the child of a fork(2): the session and the library's threads
 * are the parent's. Nothing was done (the parent's job goes on). */
#define SPERLI_E_FORK (-15)
/* A communicator of the open session that this call cannot take: one freed
 * by sperli_comm_free; one made by sperli_split given to a function that
 * takes the session only (sperli_finish, sperli_abort, sperli_exit,
 * sperli_use_checkpoints, sperli_checkpoint, sperli_resume); or the
 * session itself given to sperli_comm_free; one made by sperli_split in
 * an earlier generation (before a recovery, shrink or grow). (H1617 in Go
 * and Starlark.) */
#define SPERLI_E_COMM (-16)
/* Not a mistake of the caller: a rank was lost and the job recovered in
 * place (SPEC §10.2). The call was abandoned with its generation; the
 * session is in the next generation now (same handle; its rank, size and
 * generation may have changed) and what belonged to the old one is gone —
 * the kept result (empty now), the open operations (SPERLI_E_OPERATION),
 * the communicators made by split (SPERLI_E_COMM). Call sperli_resume and
 * go on from the state it gives, as after a start. Out arguments are
 * untouched. Any call that uses the job may answer it; the message
 * (sperli_last_error) names the loss. */
#define SPERLI_E_RECOVERED (-17)
/* A loss mode that is neither SPERLI_LOSS_RECOVER nor SPERLI_LOSS_RETURN,
 * or sperli_shrink / sperli_grow in a session that has not set
 * SPERLI_LOSS_RETURN. */
#define SPERLI_E_MODE (-18)

/* Not an error: sperli_init or sperli_init_stdin of a spare (SPEC §10.1)
 * whose job finished without needing it. No session is open; end the
 * program with sperli_exit(SPERLI_NONE, SPERLI_NOT_NEEDED, &status), which
 * gives exit status 0 (so does the usual "init failed" path of a program
 * that passes the code on). */
#define SPERLI_NOT_NEEDED 1

/* Refusals of the job: the code is the number of Hnnnn (SPEC §13). */
#define SPERLI_H1601 1601 /* peer certificate refused: none, another CA, wrong name or address, not TLS 1.3 */
#define SPERLI_H1602 1602 /* hello missing or malformed */
#define SPERLI_H1603 1603 /* token signature does not verify */
#define SPERLI_H1604 1604 /* token expired */
#define SPERLI_H1605 1605 /* token of another job */
#define SPERLI_H1606 1606 /* token of another rank */
#define SPERLI_H1607 1607 /* token's size, incarnation or host does not match */
#define SPERLI_H1608 1608 /* frame payload over 16 MiB */
#define SPERLI_H1609 1609 /* frame header malformed, or from the wrong source */
#define SPERLI_H1610 1610 /* peer not reachable within the dial window (30 s) */
#define SPERLI_H1611 1611 /* peer lost: silence limit passed, or connection broke without bye */
#define SPERLI_H1612 1612 /* job ended by another rank (its abort, loss or error) */
#define SPERLI_H1613 1613 /* collective does not match across ranks */
#define SPERLI_H1614 1614 /* host refused (refused, reserved or denied name) */
#define SPERLI_H1615 1615 /* job description missing or malformed */
/* 1616 is a negative code in C (E_RANK, E_TAG, E_LENGTH, E_COUNT) save for
 * one case: sperli_init and sperli_init_stdin answer it for an environment
 * variable of the runtime outside its range (SPERLI_SPIN_US). */
#define SPERLI_H1616 1616 /* argument outside its range: here SPERLI_SPIN_US at init */
/* 1617 is a negative code in C (E_HANDLE, E_OPERATION, E_FINISHED, E_OPEN):
 * no C function returns it. */
#define SPERLI_H1618 1618 /* wrong collective call (every rank returns it; the job goes on) */
#define SPERLI_H1619 1619 /* no usable checkpoint epoch */
#define SPERLI_H1620 1620 /* COMMIT signature does not verify */
#define SPERLI_H1621 1621 /* checkpoint state damaged and no good buddy copy */
#define SPERLI_H1622 1622 /* checkpoint header does not match the COMMIT or the job */
#define SPERLI_H1623 1623 /* resume with another job size */
#define SPERLI_H1624 1624 /* checkpoint while a send or receive is open */
#define SPERLI_H1625 1625 /* checkpoint storage failed (write, sync, rename, space) */
#define SPERLI_H1626 1626 /* communicator revoked */
#define SPERLI_H1627 1627 /* protocol violation by a joined peer (credit, sizes, records or files) */
#define SPERLI_H1628 1628 /* slots run different programs, arguments or loss policies */

/* ------------------------------------------------------------------------
 * Limits (SPEC §6, §7, §8.3).
 */
#define SPERLI_MAX_TAG 2147483647
#define SPERLI_MAX_MESSAGE 16777216   /* bytes of one message */
#define SPERLI_MAX_COLLECTIVE 16777200 /* bytes one rank gives one collective */
#define SPERLI_MIN_SILENCE_MS 100
#define SPERLI_MAX_SILENCE_MS 86400000
#define SPERLI_MAX_JOB_LINE 1048576 /* bytes of a job description line */
#define SPERLI_MAX_PATH 4095        /* bytes of a checkpoint directory path */
/* bytes of one checkpoint state: 2^40 less the file's 96-byte header (a
 * rank takes a buddy file of at most 2^40 bytes). The state is copied into
 * the file in memory: in practice the limit is the memory at hand. */
#define SPERLI_MAX_CHECKPOINT 1099511627680ULL
#define SPERLI_JOB_ID_LEN 32        /* hex digits of a job id */

/* Element types of collective data (SPEC §8.2): little-endian elements.
 * The numbers are those of the wire. */
enum sperli_type {
    SPERLI_BYTES = 1,
    SPERLI_INT32 = 2,
    SPERLI_INT64 = 3,
    SPERLI_UINT32 = 4,
    SPERLI_UINT64 = 5,
    SPERLI_FLOAT32 = 6,
    SPERLI_FLOAT64 = 7
};

/* Reductions (SPEC §8.2):
 *   sum, prod, min, max  on int32 int64 uint32 uint64 float32 float64
 *   land, lor, lxor      on int32 int64 uint32 uint64 (non-zero is true; result 0 or 1)
 *   band, bor, bxor      on bytes int32 int64 uint32 uint64
 * Whole numbers wrap around; the reduction runs in rank order
 * ((r0 ∘ r1) ∘ r2) …; min and max of a NaN give NaN. */
enum sperli_reduction {
    SPERLI_SUM = 1,
    SPERLI_PROD = 2,
    SPERLI_MIN = 3,
    SPERLI_MAX = 4,
    SPERLI_LAND = 5,
    SPERLI_LOR = 6,
    SPERLI_LXOR = 7,
    SPERLI_BAND = 8,
    SPERLI_BOR = 9,
    SPERLI_BXOR = 10
};

/* ------------------------------------------------------------------------
 * Joining
 */

/*
 * sperli_init — join the job of a job description line.
 *
 * line     the job description: one line of JSON, NUL-terminated, with or
 *          without its line end ("\n" or "\r\n"), as the first line of a
 *          rank's standard input holds it (read it with fgets into a buffer
 *          of SPERLI_MAX_JOB_LINE + 2 bytes, or read(2) byte by byte). It
 *          holds this rank's private key: keep it secret, clear it after.
 * session  where the session handle is written (only on success).
 *
 * It checks the description (and its host table against the refused names
 * of SPEC §4.4, with this process's SPERLI_REFUSED_HOSTS), listens for every
 * lower rank, dials every higher one, checks every peer's certificate and
 * token, and returns when every peer has joined — or when the join window
 * (30 s unless the description says otherwise) has ended.
 *
 * Returns
 *   0                   joined; *session is the new handle
 *   SPERLI_E_NULL       line or session is NULL
 *   SPERLI_E_LENGTH     line is longer than SPERLI_MAX_JOB_LINE bytes
 *   SPERLI_E_SESSION    a session is open in this process
 *   1615                the description is empty, not one JSON object, or
 *                       a field is wrong (its key, certificate, listen_fd…)
 *   1614                its host table names a refused host
 *   1601, 1603 … 1607   this rank was refused by a peer with that code
 *                       (certificate, token signature, expiry, job, rank,
 *                       size/incarnation/host), or, when the window ended,
 *                       the last refusal this rank gave a peer that never
 *                       came right (also 1602, 1608, 1609)
 *   1610                a peer was not reachable within the join window, or
 *                       this rank cannot listen at its address
 *   1616                the environment's SPERLI_SPIN_US is not a whole
 *                       number of microseconds from 0 to 1000000
 *   SPERLI_NOT_NEEDED   (1) this process is a spare (SPEC §10.1) and the
 *                       job finished without needing it: no session is
 *                       open; sperli_exit(SPERLI_NONE, SPERLI_NOT_NEEDED,
 *                       &status) gives status 0
 *
 * A spare does not return from init when it joins: it waits until it takes
 * a lost rank's place (then init answers 0 and the session is that rank's:
 * call sperli_resume for its state) or until the job has finished.
 *
 * A listen_fd that is no listening socket is 1615 and that descriptor is
 * left open (listen_fd 1 or 2 does not close standard output or error).
 */
int sperli_init(const char *line, sperli_t *session);

/*
 * sperli_init_stdin — read the job description from the first line of
 * standard input (file descriptor 0, nothing past the line end: a pipe or
 * socket is peeked at, a file read at its offset, anything else read byte
 * by byte) and join, as sperli_init does. Do not use stdio on stdin before
 * it. A rank started by hand (no launcher) may read the rest of standard
 * input afterwards; a launched rank must not (it is the control channel).
 *
 * session  where the session handle is written (only on success).
 *
 * Returns the codes of sperli_init, except SPERLI_E_LENGTH: a line over
 * SPERLI_MAX_JOB_LINE bytes or an empty standard input is 1615.
 */
int sperli_init_stdin(sperli_t *session);

/*
 * sperli_rank, sperli_size — this rank's number in comm (0 … size-1) and
 * the number of ranks in comm: in the job for the session, in the
 * communicator for one made by sperli_split.
 *
 * comm     the session, or a communicator made by sperli_split.
 * rank     where the rank is written.   size  where the size is written.
 *
 * Returns 0, SPERLI_E_NULL (rank or size is NULL).
 */
int sperli_rank(sperli_t comm, int *rank);
int sperli_size(sperli_t comm, int *size);

/*
 * sperli_job — the job's id: SPERLI_JOB_ID_LEN (32) hex digits and a NUL.
 *
 * comm     the session, or a communicator made by sperli_split (the job's).
 * buf      where the id is written; cap  its size in bytes, at least 33.
 *
 * Returns 0, SPERLI_E_NULL (buf is NULL), SPERLI_E_LENGTH (cap < 33).
 */
int sperli_job(sperli_t comm, char *buf, size_t cap);

/*
 * sperli_incarnation — the job's incarnation: 0, one more at each restart,
 * in-place recovery, shrink and grow (its generation: sperli_generation).
 *
 * comm     the session, or a communicator made by sperli_split (the job's).
 * inc      where the incarnation is written.
 *
 * Returns 0, SPERLI_E_NULL (inc is NULL).
 */
int sperli_incarnation(sperli_t comm, uint32_t *inc);

/* ------------------------------------------------------------------------
 * Point-to-point (SPEC §6)
 */

/*
 * sperli_send — send len bytes at data to rank dest with tag.
 *
 * It returns when the message is handed to the connection; it may block
 * while the receiver's buffer for this rank is full (64 MiB; docs/design.md
 * "Flow control"). The message is read from data during the call only (no
 * copy); afterwards the buffer is the caller's. Sending to this rank itself
 * works (a receive of it gets the message).
 *
 * comm     the session, or a communicator made by sperli_split.
 * dest     the receiving rank, 0 … size-1 (a rank of comm).
 * tag      0 … SPERLI_MAX_TAG.
 * data     the message; may be NULL when len is 0.
 * len      its length in bytes, 0 … SPERLI_MAX_MESSAGE.
 *
 * Returns
 *   0                   the message is on its way
 *   SPERLI_E_RANK       dest is outside comm
 *   SPERLI_E_TAG        tag is outside 0 … SPERLI_MAX_TAG
 *   SPERLI_E_NULL       data is NULL and len > 0
 *   SPERLI_E_LENGTH     len > SPERLI_MAX_MESSAGE
 *   SPERLI_E_FINISHED   rank dest has finished
 *   the job's end codes (1608, 1609, 1611, 1612, 1613)
 */
int sperli_send(sperli_t comm, int dest, int tag, const void *data, size_t len);

/*
 * sperli_recv — receive the next message from rank source with tag.
 *
 * Messages of one source and one tag arrive in the order sent; a message
 * of another tag from the same source is kept for its own receive. It
 * waits until the message is there (no longer than the silence limit after
 * the source's last sign of life, SPEC §7). The message becomes the
 * session's result: copy it out with sperli_result. With a wildcard it
 * takes, of the messages that fit, the one that arrived first (so one
 * source's messages stay in order); sperli_recv_from also tells the
 * source and tag it got.
 *
 * comm     the session, or a communicator made by sperli_split.
 * source   the sending rank, 0 … size-1 (a rank of comm), or
 *          SPERLI_ANY_SOURCE.
 * tag      0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * len      where the message's length is written (0 … SPERLI_MAX_MESSAGE).
 *
 * Returns
 *   0                   received; *len is its length
 *   SPERLI_E_RANK       source is outside comm (and not SPERLI_ANY_SOURCE)
 *   SPERLI_E_TAG        tag is outside 0 … SPERLI_MAX_TAG (and not
 *                       SPERLI_ANY_TAG)
 *   SPERLI_E_NULL       len is NULL
 *   SPERLI_E_FINISHED   rank source has finished and no such message is
 *                       kept, or source is this rank itself and no such
 *                       message was sent to it (*len and the earlier
 *                       result are untouched)
 *   the job's end codes (1608, 1609, 1611, 1612, 1613; *len is 0, the
 *   result empty)
 */
int sperli_recv(sperli_t comm, int source, int tag, size_t *len);

/*
 * sperli_start_send — start sending, return at once with an open operation.
 *
 * Messages are sent in the order sperli_send and sperli_start_send are
 * called. The data is copied: the buffer is the caller's again on return.
 * Finish the operation with sperli_finish_send exactly once.
 *
 * comm     the session, or a communicator made by sperli_split.
 * dest     the receiving rank, 0 … size-1 (a rank of comm).
 * tag      0 … SPERLI_MAX_TAG.
 * data     the message; may be NULL when len is 0.
 * len      its length in bytes, 0 … SPERLI_MAX_MESSAGE.
 * op       where the operation's handle is written (only on success).
 *
 * Returns
 *   0                   started; *op is open
 *   SPERLI_E_RANK, SPERLI_E_TAG, SPERLI_E_NULL (data NULL and len > 0, or
 *   op NULL), SPERLI_E_LENGTH, SPERLI_E_FINISHED, the job's end codes —
 *   as sperli_send
 */
int sperli_start_send(sperli_t comm, int dest, int tag, const void *data, size_t len,
                      sperli_op *op);

/*
 * sperli_finish_send — wait until the send of op is handed to the
 * connection, and finish op (its handle is no longer valid afterwards,
 * whatever the code).
 *
 * comm     the session, or any communicator of it not freed: the operation
 *          is the session's, whichever communicator started it (freed
 *          since or not).
 * op       an open send of this session.
 *
 * Returns
 *   0                    sent
 *   SPERLI_E_OPERATION   op is not an open send of this session
 *   the job's end codes (1608, 1609, 1611, 1612, 1613)
 */
int sperli_finish_send(sperli_t comm, sperli_op op);

/*
 * sperli_start_recv — post a receive for the next message from source with
 * tag and return at once with an open operation. An arriving message goes
 * to the receive posted first among those it fits. Finish it with
 * sperli_finish_recv or sperli_finish_recv_from exactly once.
 *
 * comm     the session, or a communicator made by sperli_split.
 * source   the sending rank, 0 … size-1 (a rank of comm), or
 *          SPERLI_ANY_SOURCE.
 * tag      0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * op       where the operation's handle is written (only on success).
 *
 * Returns
 *   0                   posted; *op is open
 *   SPERLI_E_RANK       source is outside comm (and not SPERLI_ANY_SOURCE)
 *   SPERLI_E_TAG        tag is outside 0 … SPERLI_MAX_TAG (and not
 *                       SPERLI_ANY_TAG)
 *   SPERLI_E_NULL       op is NULL
 *   the job's end codes (1608, 1609, 1611, 1612, 1613)
 */
int sperli_start_recv(sperli_t comm, int source, int tag, sperli_op *op);

/*
 * sperli_finish_recv — wait for the receive of op, make its message the
 * session's result, and finish op (its handle is no longer valid
 * afterwards, whatever the code).
 *
 * comm     the session, or any communicator of it (as sperli_finish_send).
 * op       an open receive of this session.
 * len      where the message's length is written.
 *
 * Returns
 *   0                    received; *len is its length
 *   SPERLI_E_OPERATION   op is not an open receive of this session
 *   SPERLI_E_NULL        len is NULL (op stays open)
 *   SPERLI_E_FINISHED    the source has finished and the message never came
 *                        (op is finished; *len and the earlier result are
 *                        untouched)
 *   the job's end codes (1608, 1609, 1611, 1612, 1613)
 */
int sperli_finish_recv(sperli_t comm, sperli_op op, size_t *len);

/*
 * sperli_recv_from — sperli_recv that also tells the source and tag of the
 * message it got (MPI_Recv with its status): for a wildcard receive.
 *
 * comm     the session, or a communicator made by sperli_split.
 * source   the sending rank (a rank of comm), or SPERLI_ANY_SOURCE.
 * tag      0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * status   where the message's source (its rank in comm), tag and length
 *          are written.
 *
 * Returns
 *   0                   received; *status tells it, status->len bytes are
 *                       the result
 *   SPERLI_E_RANK, SPERLI_E_TAG, SPERLI_E_FINISHED — as sperli_recv
 *                       (*status and the earlier result are untouched)
 *   SPERLI_E_NULL       status is NULL
 *   the job's end codes (*status is SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, 0;
 *   the result empty)
 */
int sperli_recv_from(sperli_t comm, int source, int tag, sperli_status *status);

/*
 * sperli_finish_recv_from — sperli_finish_recv that also tells the source
 * and tag of the message (MPI_Wait with its status): for a receive
 * started with a wildcard.
 *
 * comm     the session, or any communicator of it (as sperli_finish_send).
 * op       an open receive of this session.
 * status   where the message's source (its rank in the communicator that
 *          started op), tag and length are written.
 *
 * Returns the codes of sperli_finish_recv; SPERLI_E_NULL when status is
 * NULL (op stays open). On a refusal *status is SPERLI_ANY_SOURCE,
 * SPERLI_ANY_TAG, 0, as sperli_recv_from.
 */
int sperli_finish_recv_from(sperli_t comm, sperli_op op, sperli_status *status);

/*
 * sperli_probe — wait for a message that fits source and tag and tell its
 * source, tag and length without receiving it (MPI_Probe): the next receive
 * that names them (or fits it, posted first) gets it. It does not touch the
 * session's result.
 *
 * comm     the session, or a communicator made by sperli_split.
 * source   a rank of comm, or SPERLI_ANY_SOURCE.
 * tag      0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * status   where the message's source, tag and length are written (only
 *          on 0).
 *
 * Returns
 *   0                   a message fits: *status tells it
 *   SPERLI_E_RANK, SPERLI_E_TAG — as sperli_recv
 *   SPERLI_E_NULL       status is NULL
 *   SPERLI_E_FINISHED   rank source has finished and no such message is
 *                       kept
 *   the job's end codes
 */
int sperli_probe(sperli_t comm, int source, int tag, sperli_status *status);

/*
 * sperli_iprobe — sperli_probe that does not wait (MPI_Iprobe): *flag is 1
 * and *status tells the message when one that fits is here, else *flag is
 * 0 and *status is untouched. It does not read the connections itself:
 * messages come in as the library reads them (a loop of sperli_iprobe
 * sees them, but a blocking sperli_probe is cheaper).
 *
 * comm     the session, or a communicator made by sperli_split.
 * source   a rank of comm, or SPERLI_ANY_SOURCE.
 * tag      0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * flag     where 1 (a message is here) or 0 (none yet) is written.
 * status   where the message's source, tag and length are written (only
 *          when *flag is 1).
 *
 * Returns
 *   0                   *flag says whether a message fits
 *   SPERLI_E_RANK, SPERLI_E_TAG — as sperli_recv
 *   SPERLI_E_NULL       flag or status is NULL
 *   the job's end codes
 */
int sperli_iprobe(sperli_t comm, int source, int tag, int *flag, sperli_status *status);

/*
 * sperli_sendrecv — send len bytes at data to dest with sendtag and
 * receive the next message from source with recvtag, at once
 * (MPI_Sendrecv): the receive is posted before the send starts, so a ring
 * shift (every rank sends right and receives from the left) never waits
 * for ever, whatever the size. The data is read during the call only; the
 * message received becomes the session's result.
 *
 * comm     the session, or a communicator made by sperli_split.
 * dest     the receiving rank, 0 … size-1 (a rank of comm).
 * sendtag  0 … SPERLI_MAX_TAG.
 * data     the message to send; may be NULL when len is 0.
 * len      its length in bytes, 0 … SPERLI_MAX_MESSAGE.
 * source   the sending rank (a rank of comm), or SPERLI_ANY_SOURCE.
 * recvtag  0 … SPERLI_MAX_TAG, or SPERLI_ANY_TAG.
 * status   where the received message's source, tag and length are
 *          written.
 *
 * Returns
 *   0                   sent and received; status->len bytes are the result
 *   SPERLI_E_RANK       dest or source is outside comm
 *   SPERLI_E_TAG        sendtag or recvtag is outside its range
 *   SPERLI_E_NULL       data is NULL and len > 0, or status is NULL
 *   SPERLI_E_LENGTH     len > SPERLI_MAX_MESSAGE
 *   SPERLI_E_FINISHED   rank dest has finished (nothing was sent), or rank
 *                       source has finished and no such message is kept:
 *                       then the send was made all the same, only the
 *                       receive can never complete (*status and the
 *                       earlier result are untouched in both cases)
 *   the job's end codes (*status is SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, 0;
 *   the result empty)
 */
int sperli_sendrecv(sperli_t comm, int dest, int sendtag, const void *data, size_t len,
                    int source, int recvtag, sperli_status *status);

/* ------------------------------------------------------------------------
 * Collectives (SPEC §8). Every rank of comm makes the same calls on comm in
 * the same order (each communicator has its own sequence; "every rank"
 * below is every rank of comm, and a root is a rank of comm). Data is
 * bytes (elements of a type for reduce, allreduce and reduce_scatter); the
 * result is new bytes, kept as the session's result.
 *
 * SPEC §8.3 holds as for every rank: a wrong call every rank can see —
 * a root outside the job, a reduction that does not fit the type, data
 * that is no whole number of elements (of blocks, for alltoall and
 * reduce_scatter), data over SPERLI_MAX_COLLECTIVE bytes, a split color
 * below -1 — answers 1618 on every rank (also on ranks whose own arguments
 * were right) and the job goes on. Contributions of different lengths
 * (reduce, allreduce, gather, allgather, alltoall, reduce_scatter), a
 * scatter whose data is no whole number of blocks, or ranks making
 * different calls end the job: 1613 on the rank
 * that sees it, 1612 on the others. The negative codes below are caught
 * before the call starts, on this rank alone: nothing is sent, the other
 * ranks go on waiting in the call, and this rank may make it again with
 * right arguments.
 */

/*
 * sperli_barrier — return when every rank has called it.
 *
 * comm     the session, or a communicator made by sperli_split.
 *
 * Returns 0, 1613, the job's end codes.
 */
int sperli_barrier(sperli_t comm);

/*
 * sperli_bcast — every rank gets root's data.
 *
 * comm     the session, or a communicator made by sperli_split.
 * root     the rank whose data is sent (outside comm: 1618 everywhere).
 * data     the data on root (may be NULL when len is 0); ignored elsewhere
 *          (may be NULL there whatever len is).
 * len      its length on root, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the length of the result (root's len) is written.
 *
 * Returns
 *   0                   *result_len bytes are the result
 *   SPERLI_E_NULL       result_len is NULL, or this rank is root and data
 *                       is NULL with len > 0
 *   1618                root outside the job, or root's len over the limit
 *   1613, the job's end codes
 */
int sperli_bcast(sperli_t comm, int root, const void *data, size_t len, size_t *result_len);

/*
 * sperli_reduce — combine every rank's elements, element by element, with
 * a reduction, in rank order; the result on root (empty elsewhere).
 *
 * comm     the session, or a communicator made by sperli_split.
 * root     the rank that gets the result (outside comm: 1618 everywhere).
 * type     one of enum sperli_type.
 * reduction one of enum sperli_reduction.
 * data     this rank's elements, little-endian; may be NULL when len is 0.
 * len      their length in bytes: a whole number of elements, at most
 *          SPERLI_MAX_COLLECTIVE, the same on every rank.
 * result_len  where the result's length is written (len on root, 0 elsewhere).
 *
 * Returns
 *   0                   reduced
 *   SPERLI_E_TYPE       type is none of enum sperli_type
 *   SPERLI_E_OP         reduction is none of enum sperli_reduction
 *   SPERLI_E_NULL       data is NULL with len > 0, or result_len is NULL
 *   1618                root outside the job, a reduction that does not fit
 *                       the type, len no whole number of elements or over
 *                       the limit (on any rank)
 *   1613                lengths differ across ranks, or another call
 *   the job's end codes
 */
int sperli_reduce(sperli_t comm, int root, int type, int reduction, const void *data,
                  size_t len, size_t *result_len);

/*
 * sperli_allreduce — sperli_reduce to rank 0, then the result to every
 * rank: every rank gets the same bytes.
 *
 * comm, type, reduction, data, len, result_len — as sperli_reduce.
 *
 * Returns the codes of sperli_reduce (1618 for no root reason).
 */
int sperli_allreduce(sperli_t comm, int type, int reduction, const void *data, size_t len,
                     size_t *result_len);

/*
 * sperli_gather — root gets every rank's data concatenated in rank order
 * (size × len bytes); the result is empty elsewhere.
 *
 * comm     the session, or a communicator made by sperli_split.
 * root     the rank that gets the result (outside comm: 1618 everywhere).
 * data     this rank's data; may be NULL when len is 0.
 * len      its length, the same on every rank, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the result's length is written.
 *
 * Returns
 *   0                   gathered
 *   SPERLI_E_NULL       data is NULL with len > 0, or result_len is NULL
 *   1618                root outside the job, len over the limit
 *   1613                lengths differ across ranks, or another call
 *   the job's end codes
 */
int sperli_gather(sperli_t comm, int root, const void *data, size_t len, size_t *result_len);

/*
 * sperli_scatter — root's data is cut into size equal blocks; rank i gets
 * block i.
 *
 * comm     the session, or a communicator made by sperli_split.
 * root     the rank whose data is cut (outside comm: 1618 everywhere).
 * data     the data on root, a whole number of size blocks (else 1613, the
 *          job ends); ignored elsewhere (may be NULL there).
 * len      its length on root, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the block's length (len / size) is written.
 *
 * Returns
 *   0                   this rank's block is the result
 *   SPERLI_E_NULL       result_len is NULL, or this rank is root and data
 *                       is NULL with len > 0
 *   1618                root outside the job, root's len over the limit
 *   1613                root's len is no whole number of blocks, another call
 *   the job's end codes
 */
int sperli_scatter(sperli_t comm, int root, const void *data, size_t len, size_t *result_len);

/*
 * sperli_allgather — every rank gets every rank's data concatenated in
 * rank order (size × len bytes; MPI_Allgather).
 *
 * comm     the session, or a communicator made by sperli_split.
 * data     this rank's data; may be NULL when len is 0.
 * len      its length, the same on every rank, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the result's length is written.
 *
 * Returns
 *   0                   gathered
 *   SPERLI_E_NULL       data is NULL with len > 0, or result_len is NULL
 *   1618                len over the limit (on any rank)
 *   1613                lengths differ across ranks, or another call
 *   the job's end codes
 */
int sperli_allgather(sperli_t comm, const void *data, size_t len, size_t *result_len);

/*
 * sperli_alltoall — data is size equal blocks; block j goes to rank j, and
 * the result is the blocks received in rank order: block i of the result
 * is block (this rank) of rank i's data (MPI_Alltoall).
 *
 * comm     the session, or a communicator made by sperli_split.
 * data     this rank's size blocks; may be NULL when len is 0.
 * len      its length, a whole number of size blocks, the same on every
 *          rank, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the result's length (len) is written.
 *
 * Returns
 *   0                   exchanged
 *   SPERLI_E_NULL       data is NULL with len > 0, or result_len is NULL
 *   1618                len no whole number of blocks, or over the limit
 *                       (on any rank)
 *   1613                lengths differ across ranks, or another call
 *   the job's end codes
 */
int sperli_alltoall(sperli_t comm, const void *data, size_t len, size_t *result_len);

/*
 * sperli_reduce_scatter — reduce every rank's data element by element in
 * rank order, as sperli_allreduce does, and give rank i block i of the
 * result (MPI_Reduce_scatter_block): data is size equal blocks of whole
 * elements.
 *
 * comm     the session, or a communicator made by sperli_split.
 * type     one of enum sperli_type.
 * reduction one of enum sperli_reduction.
 * data     this rank's elements, little-endian; may be NULL when len is 0.
 * len      their length in bytes: size blocks of whole elements, the same
 *          on every rank, at most SPERLI_MAX_COLLECTIVE.
 * result_len  where the block's length (len / size) is written.
 *
 * Returns
 *   0                   reduced; this rank's block is the result
 *   SPERLI_E_TYPE       type is none of enum sperli_type
 *   SPERLI_E_OP         reduction is none of enum sperli_reduction
 *   SPERLI_E_NULL       data is NULL with len > 0, or result_len is NULL
 *   1618                a reduction that does not fit the type, len no
 *                       size blocks of whole elements or over the limit
 *                       (on any rank)
 *   1613                lengths differ across ranks, or another call
 *   the job's end codes
 */
int sperli_reduce_scatter(sperli_t comm, int type, int reduction, const void *data, size_t len,
                          size_t *result_len);

/* ------------------------------------------------------------------------
 * Communicators (SPEC §8.1 split)
 */

/*
 * sperli_split — make new communicators of the ranks of comm
 * (MPI_Comm_split): the ranks that give the same color form one, ranked by
 * key and then by their rank in comm. Collective on comm. The new
 * communicator has its own ranks, size, tags and collective sequence and
 * never sees another's messages; it shares the job's connections and ends
 * with the session (or with sperli_comm_free). Checkpoints stay the job's:
 * they take the session.
 *
 * comm     the session, or a communicator made by sperli_split.
 * color    0 … INT_MAX, or SPERLI_UNDEFINED (-1): this rank joins none.
 *          (Below -1: 1618 on every rank.)
 * key      any int: the order within the new communicator.
 * newcomm  where the new communicator's handle is written (> 0), or
 *          SPERLI_NONE for the color SPERLI_UNDEFINED.
 *
 * Returns
 *   0                   made; *newcomm is this rank's new communicator
 *   SPERLI_E_NULL       newcomm is NULL
 *   1618                a color below -1 (on any rank)
 *   1613                another call, the job's end codes
 */
int sperli_split(sperli_t comm, int color, int key, sperli_t *newcomm);

/*
 * sperli_comm_free — end a communicator made by sperli_split
 * (MPI_Comm_free): its handle answers SPERLI_E_COMM from here on. Not
 * collective; the job and the other communicators go on. Operations it
 * started stay open and are finished as every operation is (with the
 * session's handle, or that of any communicator not freed).
 *
 * comm     a communicator made by sperli_split, not freed yet.
 *
 * Returns
 *   0                   freed
 *   SPERLI_E_COMM       comm is the session (end it with sperli_finish), or
 *                       was freed already
 *   1626                comm was revoked (it is freed all the same)
 *   the job's end codes (comm is freed all the same)
 */
int sperli_comm_free(sperli_t comm);

/* ------------------------------------------------------------------------
 * Losses (SPEC §10.3) and generations (§10.4)
 *
 * A program that manages its losses itself, as with MPI's ULFM, sets
 * SPERLI_LOSS_RETURN on every rank; a loss then ends nothing: a call that
 * needs a lost rank answers 1611, the others go on, and the program uses
 * sperli_failed, sperli_revoke, sperli_agree, sperli_shrink, sperli_grow.
 */

/*
 * sperli_set_on_loss — what a loss does, for the whole job: every rank
 * makes the call, in the same order as its collectives (it is not one: it
 * changes this rank at once).
 *
 * comm     the session, or a communicator made by sperli_split (the job's).
 * mode     SPERLI_LOSS_RECOVER (the default: in place with spares, else
 *          the job ends) or SPERLI_LOSS_RETURN.
 *
 * Returns 0, SPERLI_E_MODE (mode is neither), the job's end codes.
 */
int sperli_set_on_loss(sperli_t comm, int mode);

/*
 * sperli_failed — the ranks of comm this rank knows lost, sorted; the list
 * only grows (until a shrink or grow makes a new world). Local.
 *
 * comm     the session, or a communicator made by sperli_split.
 * ranks    where the ranks are written; may be NULL when cap is 0.
 * cap      room in ranks, in ints.
 * n        where their number is written (also when cap is short).
 *
 * Returns
 *   0                   *n ranks written
 *   SPERLI_E_NULL       n is NULL, or ranks is NULL with cap > 0
 *   SPERLI_E_LENGTH     cap < *n: *n is the number, nothing is written
 */
int sperli_failed(sperli_t comm, int *ranks, size_t cap, size_t *n);

/*
 * sperli_revoke — every live rank's calls on comm, pending and later,
 * answer 1626, except sperli_failed, sperli_agree, sperli_shrink and
 * sperli_grow. It reaches every rank even when this one is lost meanwhile.
 * Revoking twice does nothing more. Local: it returns at once.
 *
 * comm     the session, or a communicator made by sperli_split.
 *
 * Returns 0.
 */
int sperli_revoke(sperli_t comm);

/*
 * sperli_agree — collective over the live ranks of comm: the bitwise AND
 * of their flags, the same on every live rank; after it sperli_failed is
 * the same on every live rank. Works on a revoked communicator. It needs a
 * majority of comm's ranks live (else 1611).
 *
 * comm     the session, or a communicator made by sperli_split.
 * flag     in: this rank's flag; out (on 0 only): the AND of all.
 *
 * Returns 0, SPERLI_E_NULL (flag is NULL), 1611 (no majority, or the
 * others agreed this rank is lost), the job's end codes.
 */
int sperli_agree(sperli_t comm, uint64_t *flag);

/*
 * sperli_shrink — collective over the live ranks of the job: a new world
 * of them, renumbered in their old order, in generation + 1 (rank 0's
 * roles — COMMIT signer, reduction root — pass to the new rank 0); the old
 * one is revoked. The session's handle names the new world from here on:
 * it is written to *newcomm too (so code written for MPI_Comm_shrink
 * works, and sperli_shrink(s, &s) is fine); sperli_rank and sperli_size
 * tell the new numbers; communicators made by split on the old world
 * answer SPERLI_E_COMM. With no rank lost the world stays as it is.
 *
 * comm     the session (a communicator made by split: SPERLI_E_COMM; split
 *          the new world again).
 * newcomm  where the session's handle is written.
 *
 * Returns
 *   0                   the session is the new world
 *   SPERLI_E_NULL       newcomm is NULL
 *   SPERLI_E_MODE       this session has not set SPERLI_LOSS_RETURN
 *   1611, the job's end codes
 */
int sperli_shrink(sperli_t comm, sperli_t *newcomm);

/*
 * sperli_grow — as sperli_shrink, but live spares take the lost ranks'
 * places (the lowest spare the lowest lost rank), so the size stays; a
 * promoted spare's sperli_init returns 0 and its program runs from its
 * start, as that rank. Without spares enough: 1611.
 *
 * Returns the codes of sperli_shrink.
 */
int sperli_grow(sperli_t comm, sperli_t *newcomm);

/*
 * sperli_generation — the job's generation (SPEC §10.1): 0 at launch, one
 * more at each in-place recovery, shrink, grow and launcher restart (the
 * same number as sperli_incarnation).
 * sperli_slot — this process's slot, fixed for its life: its rank at
 * launch, or for a spare size … size+spares-1.
 *
 * comm     the session, or a communicator made by sperli_split (the job's).
 *
 * Returns 0, SPERLI_E_NULL (gen or slot is NULL).
 */
int sperli_generation(sperli_t comm, uint32_t *gen);
int sperli_slot(sperli_t comm, int *slot);

/*
 * sperli_layout — the layout of the job's generation: the slot of each
 * rank of the job, slots[r] for rank r (SPEC §10.4).
 *
 * comm     the session, or a communicator made by sperli_split (the job's).
 * slots    where the slots are written; may be NULL when cap is 0.
 * cap      room in slots, in ints.
 * n        where their number (the job's size) is written, also when cap
 *          is short.
 *
 * Returns
 *   0                   *n slots written
 *   SPERLI_E_NULL       n is NULL, or slots is NULL with cap > 0
 *   SPERLI_E_LENGTH     cap < *n: nothing written
 */
int sperli_layout(sperli_t comm, int *slots, size_t cap, size_t *n);

/* ------------------------------------------------------------------------
 * Work queues (SPEC §19; docs/workqueue.md): a farm whose every item is
 * published once whatever is lost, proved by its log. The same queue as
 * Starlark's comm.work_queue and Go's workq.New: ranks of all three
 * share one.
 */

/* A work queue's handle: a number, never given twice in a process. It
 * belongs to the generation it was started in: after SPERLI_E_RECOVERED
 * (or a shrink or grow) it is SPERLI_E_HANDLE — start the queue again, with
 * the same name and items, and it goes on from its log. */
typedef int64_t sperli_work;

/* A queue's statistics, from its log (docs/workqueue.md). */
typedef struct {
    int64_t items;       /* the queue's items */
    int64_t published;   /* items published (all of them at the end) */
    int64_t executed;    /* executions the log knows */
    int64_t duplicates;  /* executed - published */
    int64_t generations; /* generations with an execution in the log */
} sperli_work_statistics;

#define SPERLI_MAX_WORK_ITEMS 16777216            /* items of one queue */
#define SPERLI_MAX_WORK_NAME 255                  /* bytes of a queue's name */
#define SPERLI_MAX_WORK_RESULT (16777216 - 64)    /* bytes of one result */

/*
 * sperli_work_start — collective on comm: starts the queue name of the n
 * items (items[i] of lens[i] bytes), the same name and items on every rank
 * (else 1613 on every rank). Rank 0 of comm is its master. A queue of that
 * name this process ran before (an earlier generation, the communicator a
 * shrink replaced) or that a restarted job left under --checkpoint-dir
 * goes on from its log.
 *
 * comm     the session, or a communicator made by sperli_split.
 * name     the queue's name, a string of at most SPERLI_MAX_WORK_NAME bytes.
 * items    n pointers (one may be NULL when its length is 0).
 * lens     n lengths, each at most SPERLI_MAX_MESSAGE.
 * n        1 … SPERLI_MAX_WORK_ITEMS.
 * wq       where the queue's handle is written.
 *
 * Returns 0, SPERLI_E_NULL (name, items, lens or wq NULL; items[i] NULL
 * with lens[i] > 0), SPERLI_E_LENGTH (a name or an item too long),
 * SPERLI_E_COUNT (n 0 or over the limit), 1613 (items that differ between
 * ranks), 1620 (a log under the checkpoint directory that does not verify),
 * 1625 (one that cannot be read), the job's end codes.
 */
int sperli_work_start(sperli_t comm, const char *name, const void *const *items,
                      const size_t *lens, size_t n, sperli_work *wq);

/*
 * sperli_work_next — leases this rank its next task: *id is the task's
 * item (its index), and the item's bytes are the session's result (its
 * length in *len; sperli_result copies it). Once every item is published
 * the queue has ended on every rank: *id is -1 and *len 0.
 *
 * Returns 0, SPERLI_E_HANDLE (wq is no queue of this generation),
 * SPERLI_E_NULL (id or len NULL), SPERLI_E_OPERATION (this rank holds a
 * task not done yet), the job's end codes (1611 or 1626 in a session that
 * manages its losses: revoke, shrink and start the queue again; 1612 when
 * the master ended the job, for example 1625: its log could not be
 * written under the checkpoint directory).
 */
int sperli_work_next(sperli_work wq, int64_t *id, size_t *len);

/*
 * sperli_work_done — gives the result of task id, which this rank holds.
 *
 * Returns 0, SPERLI_E_HANDLE, SPERLI_E_OPERATION (id is not the task this
 * rank holds), SPERLI_E_NULL (result NULL with len > 0), SPERLI_E_LENGTH
 * (len over SPERLI_MAX_WORK_RESULT), the job's end codes.
 */
int sperli_work_done(sperli_work wq, int64_t id, const void *result, size_t len);

/*
 * sperli_work_result — once the queue has ended (sperli_work_next gave -1),
 * item id's result becomes the session's result (its length in *len;
 * sperli_result copies it), the same on every rank.
 *
 * Returns 0, SPERLI_E_HANDLE, SPERLI_E_NULL (len NULL), SPERLI_E_OPERATION
 * (the queue has not ended), SPERLI_E_COUNT (id not an item).
 */
int sperli_work_result(sperli_work wq, int64_t id, size_t *len);

/*
 * sperli_work_stats — the queue's statistics from its log as this rank
 * holds it (after the end: the whole log, the same on every rank).
 *
 * Returns 0, SPERLI_E_HANDLE, SPERLI_E_NULL (st NULL).
 */
int sperli_work_stats(sperli_work wq, sperli_work_statistics *st);

/*
 * sperli_work_by_rank — the executions the queue's log holds of the slot
 * slot (stats' by_rank in Starlark: a slot is the rank's place in the job,
 * the rank itself in generation 0), from the log as this rank holds it.
 *
 * Returns 0, SPERLI_E_HANDLE, SPERLI_E_NULL (executed NULL),
 * SPERLI_E_COUNT (slot below 0 or past the job's slots).
 */
int sperli_work_by_rank(sperli_work wq, int64_t slot, int64_t *executed);

/* ------------------------------------------------------------------------
 * Failure detection, abort, finish (SPEC §7)
 */

/*
 * sperli_set_silence — set this rank's silence limit: a peer silent for
 * longer is lost (H1611). Every peer is told, so that it heartbeats often
 * enough. The runtime heartbeats on its own; a long computation needs no
 * calls.
 *
 * comm     the session, or a communicator made by sperli_split.
 * ms       the limit in milliseconds, SPERLI_MIN_SILENCE_MS … SPERLI_MAX_SILENCE_MS.
 *
 * Returns 0, SPERLI_E_COUNT (ms outside the range), the job's end codes.
 */
int sperli_set_silence(sperli_t comm, int ms);

/*
 * sperli_heartbeat — send a heartbeat to every peer now.
 *
 * comm     the session, or a communicator made by sperli_split.
 *
 * Returns 0, the job's end codes.
 */
int sperli_heartbeat(sperli_t comm);

/*
 * sperli_abort — end the job now: every peer is told and answers 1612
 * (cause "aborted"). The session ends (its handle and open operations are
 * no longer valid). End the program with sperli_exit(SPERLI_NONE, 0, …),
 * which gives exit status 1 (an aborted rank has failed).
 *
 * session  the open session (a communicator made by split: SPERLI_E_COMM).
 *
 * Returns 0.
 */
int sperli_abort(sperli_t session);

/*
 * sperli_finish — say bye to every peer, wait until every peer has said bye
 * too (or is gone), close the connections. Collective in effect, like
 * MPI_Finalize. The session ends (its handle and its communicators' are no
 * longer valid) unless the answer is SPERLI_E_OPEN. A launched rank then
 * still calls sperli_exit(SPERLI_NONE, 0, &status) so the launcher gets its
 * status record.
 *
 * session  the open session.
 *
 * Returns
 *   0                   finished
 *   SPERLI_E_COMM       session is a communicator made by sperli_split
 *                       (sperli_comm_free ends one)
 *   SPERLI_E_OPEN       operations are open; nothing was done
 *   SPERLI_E_RECOVERED  the job was recovering from a loss when this rank
 *                       came to finish: the session is open, in the next
 *                       generation (resume and run again)
 *   the job's end codes (the session has ended all the same)
 */
int sperli_finish(sperli_t session);

/* ------------------------------------------------------------------------
 * Checkpoints (SPEC §9)
 */

/*
 * sperli_use_checkpoints — name this rank's checkpoint directory (relative
 * to the working directory) and make it. Files go to DIR/<job>/<epoch>/.
 * Local to this rank; without it, checkpoint and resume use the launcher's
 * --checkpoint-dir.
 *
 * session  the open session.
 * dir      the directory, NUL-terminated; "" takes the job's
 *          --checkpoint-dir.
 *
 * Returns
 *   0                   in use
 *   SPERLI_E_NULL       dir is NULL
 *   SPERLI_E_PATH       dir is longer than SPERLI_MAX_PATH bytes
 *   1625                the directory cannot be made, or dir is "" and the
 *                       job has no --checkpoint-dir
 */
int sperli_use_checkpoints(sperli_t session, const char *dir);

/*
 * sperli_checkpoint — store state as the job's next epoch: this rank's
 * file, the buddy copy on rank (n+1) mod size, the COMMIT signed by rank 0.
 * Every rank calls it, in the same order as the collectives; it returns
 * when the COMMIT is stored on this rank.
 *
 * session  the open session.
 * state    the state, any bytes; may be NULL when len is 0.
 * len      its length, at most SPERLI_MAX_CHECKPOINT.
 *
 * Returns
 *   0                   committed
 *   SPERLI_E_NULL       state is NULL with len > 0
 *   SPERLI_E_LENGTH     len > SPERLI_MAX_CHECKPOINT (nothing is sent: the
 *                       other ranks wait in the call)
 *   1624                a rank has an open send or receive (every rank)
 *   1625                a rank's storage failed (every rank; the previous
 *                       epoch stays)
 *   1613, the job's end codes
 */
int sperli_checkpoint(sperli_t session, const void *state, size_t len);

/*
 * sperli_resume — the newest committed state of the job (collective: every
 * rank calls it, and every rank gets the same outcome). The state becomes
 * the session's result.
 *
 * session  the open session.
 * resumed  where 1 is written when a state was resumed, 0 on a fresh start
 *          (no COMMIT anywhere; the result is then empty).
 * len      where the state's length is written.
 *
 * Returns
 *   0                   *resumed says whether there was a state
 *   SPERLI_E_NULL       resumed or len is NULL
 *   1619 … 1623         no usable epoch, COMMIT signature, damaged state,
 *                       header mismatch, another job size (docs/errors.md)
 *   1625                the checkpoint directory cannot be made
 *   1613, the job's end codes
 */
int sperli_resume(sperli_t session, int *resumed, size_t *len);

/* ------------------------------------------------------------------------
 * Results, codes, the end
 */

/*
 * sperli_result — copy the session's result (of the last call that made
 * data: a receive, sendrecv, collective or resume, on any communicator)
 * into buf. The result stays: it may be copied again.
 *
 * comm     the session, or any communicator of it: the result is the
 *          session's.
 * buf      where the result is copied; may be NULL when cap is 0.
 * cap      the size of buf in bytes.
 * len      where the result's length is written (also when cap is short).
 *
 * Returns
 *   0                   *len bytes copied
 *   SPERLI_E_NULL       len is NULL, or buf is NULL with cap > 0
 *   SPERLI_E_LENGTH     cap < the result's length: *len is the length
 *                       needed, nothing is copied, the result is kept
 */
int sperli_result(sperli_t comm, void *buf, size_t cap, size_t *len);

/*
 * sperli_strerror — the text of a code: "SPERLI_E_RANK: rank outside the
 * job", "H1611: peer lost: …", "ok". Static text; any code, any time, any
 * thread (the one function that never answers SPERLI_E_BUSY). An unknown
 * code gives "unknown code".
 */
const char *sperli_strerror(int code);

/*
 * sperli_last_error — the message of the last nonzero code a function of
 * the library answered in this process (SPERLI_E_BUSY excepted: a busy
 * answer changes nothing), e.g. "H1611: rank 2 lost: no frame for 5000 ms"
 * or "SPERLI_E_RANK: sperli_send: rank 5 is outside the job (size 3)";
 * "" when there was none.
 *
 * buf      where the message is copied, NUL-terminated; may be NULL when
 *          cap is 0.
 * cap      the size of buf in bytes; any size (only *len + 1 bytes are
 *          written, so SIZE_MAX is "large enough").
 * len      where the message's length is written (without the NUL).
 *
 * Returns
 *   0                   copied
 *   SPERLI_E_NULL       len is NULL, or buf is NULL with cap > 0
 *   SPERLI_E_LENGTH     cap < *len + 1: nothing copied
 */
int sperli_last_error(char *buf, size_t cap, size_t *len);

/*
 * sperli_exit — end the program's use of the library as a Go rank's
 * runtime.Exit does, and give the exit status for exit(3) or return from
 * main: 0 done, 75 the job lost a rank, 1 anything else (SPEC §13).
 *
 * With code 0 it finishes the open session (as sperli_finish). With another
 * code it ends the job as this rank's failure (the peers answer 1612,
 * cause "failed", unless the job had ended already) and writes the error's
 * message on standard error. When the job was started by a launcher (or no
 * job description was read) it writes the status record the launcher reads
 * (the last line of standard error). The session ends.
 *
 * session  the open session, or SPERLI_NONE when there is none (init
 *          failed, or the session ended with sperli_finish or sperli_abort).
 * code     how the program ends: 0 for success, else the code of the call
 *          that failed (its message and cause are used, so a 1612 caused
 *          by a loss gives 75), or any other nonzero number (status 1).
 * status   where the exit status is written.
 *
 * Returns
 *   0                   ended; *status is the exit status
 *   SPERLI_E_HANDLE     session is neither the open session nor
 *                       SPERLI_NONE with no session open
 *   SPERLI_E_COMM       session is a communicator made by sperli_split
 *   SPERLI_E_NULL       status is NULL
 */
int sperli_exit(sperli_t session, int code, int *status);

#ifdef __cplusplus
}
#endif

#endif /* SPERLI_H */
