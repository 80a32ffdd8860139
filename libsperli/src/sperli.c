/*
 * sperli.c — the C face of libsperli (SPEC §12). Every public function
 * checks all its arguments here, before anything reaches the Go layer
 * (libsperli/go, the runtime built with -buildmode=c-archive):
 *
 *   0. the child of a fork(2) (a pthread_atfork handler marks it): every
 *      call there is SPERLI_E_FORK, before anything else;
 *   1. the one-call-at-a-time flag (an atomic compare-and-swap: a second
 *      caller gets SPERLI_E_BUSY at once and changes nothing), with the
 *      calling thread's cancellation disabled until the call returns;
 *   2. the session or communicator handle (a number, looked up in the open
 *      session's table of communicators: index 0 is the session itself,
 *      its world; the index is the Go layer's too);
 *   3. each argument in the order of sperli.h: pointers, ranks, tags,
 *      lengths, types, reductions, counts, paths, operation handles (a
 *      table kept here: slot index and generation in one 64-bit number).
 *
 * Only then is the Go layer called. It answers 0, a code 1601 … 1615 or
 * 1618 … 1628, or SPERLI_E_FINISHED (the runtime's H1617); init also 1616
 * (an environment variable of the runtime out of its range). Anything
 * else is a broken promise of the library and ends the process with
 * abort(3).
 *
 * State below is guarded by the busy flag: only the holder touches it.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "sperli.h"
#include "libsperli_go.h"
#include "wait.h"

/* DONE declares the record a waiting call of the Go layer reports to. */
#define DONE sperligo_done done = {0, 0}

/* ------------------------------------------------------------------------
 * State
 */

static atomic_int busy;                /* 1 while a call runs */
static int held_cancel;                /* the holder's cancellation state before its call */
static volatile int in_child;          /* set in the child of a fork(2) */
static int atfork_failed;              /* pthread_atfork failed: compare the pid instead */
static pid_t start_pid;
static sperli_t open_session;          /* 0: none */
static sperli_t last_handle;           /* session and communicator handles are never reused */
static int s_rank, s_size;             /* in the world: comms[0] */
static uint32_t s_inc;                 /* the generation (the incarnation) */
static int s_slot;                     /* this process's slot */
static int s_loss_return;              /* sperli_set_on_loss(SPERLI_LOSS_RETURN) was made */
static char s_job[SPERLI_JOB_ID_LEN + 1];
static size_t s_result_len;            /* the kept result's length */

static int last_code;                  /* the last nonzero code answered */
static int last_from_go;               /* its message is the Go layer's */
static char last_msg[1024];

/* Operation handles: (generation << 32) | (slot + 1). A slot's generation is
 * 0 while it is free; generations count up and are never reused within the
 * 31 bits, so a finished or made-up handle never matches. */
enum { OP_FREE = 0, OP_SEND = 1, OP_RECV = 2 };
struct slot {
    uint32_t gen;
    int kind;
};
static struct slot *slots;
static size_t nslots;   /* slots in use or ever used (the table's length) */
static size_t capslots; /* allocated */
static size_t nopen;    /* open operations */
static uint32_t next_gen;

/* Communicators of the open session, in the order made: index 0 is the
 * world (the session's handle), each later one made by sperli_split. The
 * index is the Go layer's index of the same communicator. Freed ones stay
 * (marked), so that their handles answer SPERLI_E_COMM, not
 * SPERLI_E_HANDLE; the table ends with the session. */
enum { COMM_LIVE = 0, COMM_FREED = 1, COMM_OLD = 2 };
struct comm {
    sperli_t h;
    int rank, size;
    int freed; /* COMM_FREED by sperli_comm_free, COMM_OLD: made in an earlier generation */
};
static struct comm *comms;
static size_t ncomms, capcomms;

/* ------------------------------------------------------------------------
 * Helpers
 */

/* The child of a fork(2) cannot use the library: the Go runtime's threads
 * and the session are the parent's, and a call would write into the
 * parent's connections. A pthread_atfork handler marks the child (and
 * where it could not be installed, the process id is compared). */
static void child_after_fork(void) { in_child = 1; }

__attribute__((constructor)) static void setup(void) {
    start_pid = getpid();
    if (pthread_atfork(NULL, NULL, child_after_fork) != 0) atfork_failed = 1;
}

static int forked(void) { return in_child || (atfork_failed && getpid() != start_pid); }

/* enter takes the one-call-at-a-time flag: 0, SPERLI_E_FORK or
 * SPERLI_E_BUSY. Cancellation of the calling thread is disabled first and
 * stays so until leave: a call that waits (pthread_cond_wait in wait.c is
 * a cancellation point) is never cut off with the flag taken, the wait's
 * mutex locked and the Go layer still to write into the caller's stack; a
 * pthread_cancel sent meanwhile takes effect at the thread's first
 * cancellation point after the call (docs/c.md §7). */
static int enter(void) {
    if (forked()) return SPERLI_E_FORK;
    int old, zero = 0;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    if (!atomic_compare_exchange_strong_explicit(&busy, &zero, 1, memory_order_acquire,
                                                 memory_order_relaxed)) {
        pthread_setcancelstate(old, &zero);
        return SPERLI_E_BUSY;
    }
    held_cancel = old;
    return 0;
}

static int leave(int rc) {
    int old = held_cancel, ignored;
    atomic_store_explicit(&busy, 0, memory_order_release);
    pthread_setcancelstate(old, &ignored);
    return rc;
}

static void broken(const char *why, int code) {
    fprintf(stderr, "libsperli: broken promise, aborting: %s (code %d)\n", why, code);
    fflush(stderr);
    abort();
}

static const char *ename(int code);

/* fail records a negative code of this layer with its message. */
static int fail(int code, const char *fn, const char *fmt, ...) {
    va_list ap;
    int n = snprintf(last_msg, sizeof last_msg, "%s: %s: ", ename(code), fn);
    if (n < 0 || (size_t)n >= sizeof last_msg) n = 0;
    va_start(ap, fmt);
    vsnprintf(last_msg + n, sizeof last_msg - (size_t)n, fmt, ap);
    va_end(ap);
    last_code = code;
    last_from_go = 0;
    return code;
}

/* gone checks what the Go layer answered. SPERLI_E_FINISHED, the one
 * negative code it gives, gets a message as this layer's negative codes
 * have (the code's name, the function), the runtime's text saying why. */
static void moved(void);

static int gone(int rc, const char *fn) {
    if (rc == 0) return 0;
    if (rc == SPERLI_E_RECOVERED) moved();
    if (rc == SPERLI_E_FINISHED || rc == SPERLI_E_RECOVERED) {
        char why[sizeof last_msg];
        sperligo_error(why, sizeof why);
        const char *w = strncmp(why, "H1617: ", 7) == 0 ? why + 7 : why;
        return fail(rc, fn, "%s", w);
    }
    if ((rc >= 1601 && rc <= 1615) || (rc >= 1618 && rc <= 1628)) {
        last_code = rc;
        last_from_go = 1;
        return rc;
    }
    broken(fn, rc);
    return rc;
}

/* gone_init is gone for init, which may also answer 1616: an environment
 * variable of the runtime (SPERLI_SPIN_US) outside its range. */
static int gone_init(int rc, const char *fn) {
    if (rc == 1616 || rc == SPERLI_NOT_NEEDED) {
        last_code = rc;
        last_from_go = 1;
        return rc;
    }
    return gone(rc, fn);
}

/* find_comm is the index in comms of handle h of the open session, or -1.
 * Handles grow in the order made, so the table is sorted by handle save
 * after the counter wrapped: a linear look-up from the newest. */
static long find_comm(sperli_t h) {
    if (h <= 0 || open_session == 0) return -1;
    for (size_t i = ncomms; i > 0; i--)
        if (comms[i - 1].h == h) return (long)(i - 1);
    return -1;
}

static int no_handle(sperli_t h, const char *fn) {
    if (open_session == 0)
        return fail(SPERLI_E_HANDLE, fn, "session %d is not open (no session is)", h);
    return fail(SPERLI_E_HANDLE, fn, "handle %d is neither the open session (%d) nor a communicator of it",
                h, open_session);
}

/* check_session: h is the open session itself, for the functions that take
 * the session only (finish, abort, exit, checkpoints). */
static int check_session(sperli_t h, const char *fn) {
    long i = find_comm(h);
    if (i < 0) return no_handle(h, fn);
    if (i > 0)
        return fail(SPERLI_E_COMM, fn, "communicator %d was made by sperli_split%s; %s takes the session (%d)",
                    h, comms[i].freed == COMM_FREED ? " (and freed)" : comms[i].freed == COMM_OLD ? " (in an earlier generation)" : "",
                    fn, open_session);
    return 0;
}

/* check_comm: h is the session or a communicator of it not freed; *ci is
 * its index. */
static int check_comm(sperli_t h, const char *fn, long *ci) {
    long i = find_comm(h);
    if (i < 0) return no_handle(h, fn);
    if (comms[i].freed == COMM_FREED)
        return fail(SPERLI_E_COMM, fn, "communicator %d was freed by sperli_comm_free", h);
    if (comms[i].freed == COMM_OLD)
        return fail(SPERLI_E_COMM, fn,
                    "communicator %d was made by sperli_split in generation %u or earlier; the session is in generation %u now (split again)",
                    h, comms[i].rank, s_inc);
    *ci = i;
    return 0;
}

static const char *where(long ci) { return ci == 0 ? "the job" : "the communicator"; }

static int check_rank(long ci, int r, const char *fn, const char *what) {
    if (r < 0 || r >= comms[ci].size)
        return fail(SPERLI_E_RANK, fn, "%s %d is outside %s (size %d)", what, r, where(ci), comms[ci].size);
    return 0;
}

/* check_source is check_rank for a receive or probe: SPERLI_ANY_SOURCE too. */
static int check_source(long ci, int r, const char *fn, const char *what) {
    if (r == SPERLI_ANY_SOURCE) return 0;
    if (r < 0 || r >= comms[ci].size)
        return fail(SPERLI_E_RANK, fn, "%s %d is outside %s (size %d) and not SPERLI_ANY_SOURCE (-1)", what, r,
                    where(ci), comms[ci].size);
    return 0;
}

static int check_tag(int tag, const char *fn) {
    if (tag < 0) /* int holds nothing over SPERLI_MAX_TAG */
        return fail(SPERLI_E_TAG, fn, "tag %d is outside 0 to %d", tag, SPERLI_MAX_TAG);
    return 0;
}

/* check_rtag is check_tag for a receive or probe: SPERLI_ANY_TAG too. */
static int check_rtag(int tag, const char *fn) {
    if (tag < 0 && tag != SPERLI_ANY_TAG)
        return fail(SPERLI_E_TAG, fn, "tag %d is outside 0 to %d and not SPERLI_ANY_TAG (-1)", tag, SPERLI_MAX_TAG);
    return 0;
}

static int check_null(const void *p, const char *fn, const char *what) {
    if (p == NULL) return fail(SPERLI_E_NULL, fn, "%s is NULL", what);
    return 0;
}

static int check_data(const void *p, size_t len, const char *fn, const char *what) {
    if (p == NULL && len > 0)
        return fail(SPERLI_E_NULL, fn, "%s is NULL with a length of %zu bytes", what, len);
    return 0;
}

static int check_message(size_t len, const char *fn) {
    if (len > SPERLI_MAX_MESSAGE)
        return fail(SPERLI_E_LENGTH, fn, "message is %zu bytes, limit %d", len, SPERLI_MAX_MESSAGE);
    return 0;
}

static int check_type(int type, const char *fn) {
    if (type < SPERLI_BYTES || type > SPERLI_FLOAT64)
        return fail(SPERLI_E_TYPE, fn, "element type %d is none of SPERLI_BYTES (1) to SPERLI_FLOAT64 (7)", type);
    return 0;
}

static int check_op(int op, const char *fn) {
    if (op < SPERLI_SUM || op > SPERLI_BXOR)
        return fail(SPERLI_E_OP, fn, "reduction %d is none of SPERLI_SUM (1) to SPERLI_BXOR (10)", op);
    return 0;
}

/* world is the session's world as it is now (after a join, a recovery, a
 * shrink or a grow); the communicators made by split in earlier generations
 * answer SPERLI_E_COMM from here on. Their rank field keeps the generation
 * they were made in, for the message. */
static void world(void) {
    uint32_t was = s_inc;
    sperligo_where(&s_rank, &s_size, &s_inc, &s_slot);
    if (ncomms == 0) return;
    comms[0].rank = s_rank;
    comms[0].size = s_size;
    if (s_inc == was) return;
    for (size_t i = 1; i < ncomms; i++)
        if (comms[i].freed != COMM_OLD) comms[i].freed = COMM_OLD, comms[i].rank = (int)was;
}

/* moved is what SPERLI_E_RECOVERED leaves: the session is in the next
 * generation, and what belonged to the old one is gone — the kept result,
 * the open operations (their handles answer SPERLI_E_OPERATION), the
 * communicators made by split. */
static void moved(void) {
    world();
    s_result_len = 0;
    for (size_t i = 0; i < nslots; i++) slots[i].gen = 0, slots[i].kind = OP_FREE;
    nslots = 0;
    nopen = 0;
}

static size_t nworks;

static void end_session(void) {
    open_session = 0;
    nworks = 0;
    s_loss_return = 0;
    ncomms = 0;
    s_result_len = 0;
    for (size_t i = 0; i < nslots; i++) slots[i].gen = 0, slots[i].kind = OP_FREE;
    nslots = 0;
    nopen = 0;
}

/* slot_new finds a free slot (or grows the table); -1 when memory is out. */
static long slot_new(void) {
    for (size_t i = 0; i < nslots; i++)
        if (slots[i].kind == OP_FREE) return (long)i;
    if (nslots == capslots) {
        size_t cap = capslots ? capslots * 2 : 64;
        if (cap > 0x7ffffffe) return -1;
        struct slot *p = realloc(slots, cap * sizeof *p);
        if (p == NULL) return -1;
        slots = p;
        capslots = cap;
    }
    slots[nslots].gen = 0;
    slots[nslots].kind = OP_FREE;
    return (long)nslots++;
}

static sperli_op slot_take(long i, int kind) {
    next_gen = next_gen >= 0x7fffffff ? 1 : next_gen + 1;
    slots[i].gen = next_gen;
    slots[i].kind = kind;
    nopen++;
    return ((sperli_op)next_gen << 32) | (sperli_op)(i + 1);
}

static void slot_free(long i) {
    if ((size_t)i >= nslots || slots[i].kind == OP_FREE) return; /* dropped by a recovery */
    slots[i].gen = 0;
    slots[i].kind = OP_FREE;
    nopen--;
    while (nslots > 0 && slots[nslots - 1].kind == OP_FREE) nslots--;
}

/* check_op_handle returns the slot of op, or a code (< 0) through *rc. */
static long find_op(sperli_op op, int kind, const char *fn, int *rc) {
    const char *want = kind == OP_SEND ? "send" : "receive";
    uint64_t idx = (uint64_t)op & 0xffffffffu, gen = (uint64_t)op >> 32;
    if (op <= 0 || idx == 0 || idx > nslots || gen == 0 || slots[idx - 1].gen != gen) {
        *rc = fail(SPERLI_E_OPERATION, fn, "operation %lld is not an open operation of this session",
                   (long long)op);
        return -1;
    }
    if (slots[idx - 1].kind != kind) {
        *rc = fail(SPERLI_E_OPERATION, fn, "operation %lld is not a %s", (long long)op, want);
        return -1;
    }
    *rc = 0;
    return (long)(idx - 1);
}

/* made records the result of a call that makes data: n bytes when it
 * answered 0, none for a refusal (rc > 0). A negative code (SPERLI_E_FINISHED
 * from the Go layer) leaves the earlier result and *result_len as they
 * were, as every negative code does. */
static int made(int rc, size_t n, size_t *result_len) {
    if (rc < 0) return rc;
    s_result_len = n;
    *result_len = n;
    return rc;
}

/* made_status is made for the calls that tell a status: on a refusal the
 * result is empty and *st says no message. */
static int made_status(int rc, int src, int tag, size_t n, sperli_status *st) {
    if (rc < 0) return rc;
    if (rc > 0) src = SPERLI_ANY_SOURCE, tag = SPERLI_ANY_TAG, n = 0;
    s_result_len = n;
    st->source = src;
    st->tag = tag;
    st->len = n;
    return rc;
}

/* next_handle gives a session or communicator handle: > 0, one counter for
 * both, so that no handle is given twice. */
static sperli_t next_handle(void) {
    if (last_handle >= 0x7fffffff) last_handle = 0;
    return ++last_handle;
}

/* comm_room makes room for one more communicator; broken when memory is out. */
static void comm_room(void) {
    if (ncomms < capcomms) return;
    size_t cap = capcomms ? capcomms * 2 : 8;
    struct comm *p = cap > 0x7ffffffe ? NULL : realloc(comms, cap * sizeof *p);
    if (p == NULL) broken("no memory for the table of communicators", 0);
    comms = p;
    capcomms = cap;
}

/* ------------------------------------------------------------------------
 * Joining
 */

static int joined(sperli_t *session) {
    open_session = next_handle();
    s_result_len = 0;
    s_loss_return = 0;
    ncomms = 0;
    comm_room();
    comms[ncomms++] = (struct comm){open_session, s_rank, s_size, 0};
    world();
    *session = open_session;
    return 0;
}

int sperli_init(const char *line, sperli_t *session) {
    static const char fn[] = "sperli_init";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_null(line, fn, "line")) || (rc = check_null(session, fn, "session")))
        return leave(rc);
    size_t n = strnlen(line, (size_t)SPERLI_MAX_JOB_LINE + 3);
    size_t body = n;
    if (body > 0 && line[body - 1] == '\n') body--;
    if (body > 0 && line[body - 1] == '\r') body--;
    if (body > SPERLI_MAX_JOB_LINE)
        return leave(fail(SPERLI_E_LENGTH, fn, "job description line is longer than %d bytes",
                          SPERLI_MAX_JOB_LINE));
    if (open_session != 0)
        return leave(fail(SPERLI_E_SESSION, fn, "session %d is open; a process holds one session",
                          open_session));
    DONE;
    sperligo_init((char *)line, n, 0, &s_rank, &s_size, &s_inc, s_job, &done);
    rc = gone_init(sperligo_wait(&done), fn);
    if (rc == 0) joined(session);
    return leave(rc);
}

int sperli_init_stdin(sperli_t *session) {
    static const char fn[] = "sperli_init_stdin";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_null(session, fn, "session"))) return leave(rc);
    if (open_session != 0)
        return leave(fail(SPERLI_E_SESSION, fn, "session %d is open; a process holds one session",
                          open_session));
    DONE;
    sperligo_init(NULL, 0, 1, &s_rank, &s_size, &s_inc, s_job, &done);
    rc = gone_init(sperligo_wait(&done), fn);
    if (rc == 0) joined(session);
    return leave(rc);
}

int sperli_rank(sperli_t comm, int *rank) {
    static const char fn[] = "sperli_rank";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(rank, fn, "rank"))) return leave(rc);
    *rank = comms[ci].rank;
    return leave(0);
}

int sperli_size(sperli_t comm, int *size) {
    static const char fn[] = "sperli_size";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(size, fn, "size"))) return leave(rc);
    *size = comms[ci].size;
    return leave(0);
}

int sperli_job(sperli_t comm, char *buf, size_t cap) {
    static const char fn[] = "sperli_job";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(buf, fn, "buf"))) return leave(rc);
    if (cap < SPERLI_JOB_ID_LEN + 1)
        return leave(fail(SPERLI_E_LENGTH, fn, "buffer of %zu bytes, want at least %d", cap,
                          SPERLI_JOB_ID_LEN + 1));
    memcpy(buf, s_job, SPERLI_JOB_ID_LEN + 1);
    return leave(0);
}

int sperli_incarnation(sperli_t comm, uint32_t *inc) {
    static const char fn[] = "sperli_incarnation";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(inc, fn, "inc"))) return leave(rc);
    *inc = s_inc;
    return leave(0);
}

/* ------------------------------------------------------------------------
 * Point-to-point
 */

int sperli_send(sperli_t comm, int dest, int tag, const void *data, size_t len) {
    static const char fn[] = "sperli_send";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_rank(ci, dest, fn, "rank")) ||
        (rc = check_tag(tag, fn)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_message(len, fn)))
        return leave(rc);
    return leave(gone(sperligo_send((int)ci, dest, tag, (void *)data, len), fn));
}

/* recv_any is sperli_recv and sperli_recv_from: what it got in *n, *src,
 * *tag (the Go layer writes them only on 0). */
static int recv_any(long ci, int source, int tag, size_t *n, int *src, int *gtag, const char *fn) {
    DONE;
    sperligo_recv((int)ci, source, tag, n, src, gtag, &done);
    return gone(sperligo_wait(&done), fn);
}

int sperli_recv(sperli_t comm, int source, int tag, size_t *len) {
    static const char fn[] = "sperli_recv";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_source(ci, source, fn, "rank")) ||
        (rc = check_rtag(tag, fn)) || (rc = check_null(len, fn, "len")))
        return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    rc = recv_any(ci, source, tag, &n, &src, &gtag, fn);
    return leave(made(rc, n, len));
}

int sperli_recv_from(sperli_t comm, int source, int tag, sperli_status *status) {
    static const char fn[] = "sperli_recv_from";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_source(ci, source, fn, "rank")) ||
        (rc = check_rtag(tag, fn)) || (rc = check_null(status, fn, "status")))
        return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    rc = recv_any(ci, source, tag, &n, &src, &gtag, fn);
    return leave(made_status(rc, src, gtag, n, status));
}

int sperli_start_send(sperli_t comm, int dest, int tag, const void *data, size_t len,
                      sperli_op *op) {
    static const char fn[] = "sperli_start_send";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_rank(ci, dest, fn, "rank")) ||
        (rc = check_tag(tag, fn)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_message(len, fn)) || (rc = check_null(op, fn, "op")))
        return leave(rc);
    long i = slot_new();
    if (i < 0) broken("no memory for the table of operations", 0);
    rc = gone(sperligo_start_send((int)i, (int)ci, dest, tag, (void *)data, len), fn);
    if (rc == 0) *op = slot_take(i, OP_SEND);
    return leave(rc);
}

int sperli_finish_send(sperli_t comm, sperli_op op) {
    static const char fn[] = "sperli_finish_send";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    long i = find_op(op, OP_SEND, fn, &rc);
    if (rc) return leave(rc);
    DONE;
    sperligo_finish_send((int)i, &done);
    rc = gone(sperligo_wait(&done), fn);
    slot_free(i);
    return leave(rc);
}

int sperli_start_recv(sperli_t comm, int source, int tag, sperli_op *op) {
    static const char fn[] = "sperli_start_recv";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_source(ci, source, fn, "rank")) ||
        (rc = check_rtag(tag, fn)) || (rc = check_null(op, fn, "op")))
        return leave(rc);
    long i = slot_new();
    if (i < 0) broken("no memory for the table of operations", 0);
    rc = gone(sperligo_start_recv((int)i, (int)ci, source, tag), fn);
    if (rc == 0) *op = slot_take(i, OP_RECV);
    return leave(rc);
}

/* finish_recv is sperli_finish_recv and sperli_finish_recv_from after their
 * checks: op (slot i) is finished whatever the code. */
static int finish_recv(long i, size_t *n, int *src, int *gtag, const char *fn) {
    DONE;
    sperligo_finish_recv((int)i, n, src, gtag, &done);
    int rc = gone(sperligo_wait(&done), fn);
    slot_free(i);
    return rc;
}

int sperli_finish_recv(sperli_t comm, sperli_op op, size_t *len) {
    static const char fn[] = "sperli_finish_recv";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    long i = find_op(op, OP_RECV, fn, &rc);
    if (rc) return leave(rc);
    if ((rc = check_null(len, fn, "len"))) return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    rc = finish_recv(i, &n, &src, &gtag, fn);
    return leave(made(rc, n, len));
}

int sperli_finish_recv_from(sperli_t comm, sperli_op op, sperli_status *status) {
    static const char fn[] = "sperli_finish_recv_from";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    long i = find_op(op, OP_RECV, fn, &rc);
    if (rc) return leave(rc);
    if ((rc = check_null(status, fn, "status"))) return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    rc = finish_recv(i, &n, &src, &gtag, fn);
    return leave(made_status(rc, src, gtag, n, status));
}

int sperli_probe(sperli_t comm, int source, int tag, sperli_status *status) {
    static const char fn[] = "sperli_probe";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_source(ci, source, fn, "rank")) ||
        (rc = check_rtag(tag, fn)) || (rc = check_null(status, fn, "status")))
        return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    DONE;
    sperligo_probe((int)ci, source, tag, &n, &src, &gtag, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) *status = (sperli_status){src, gtag, n};
    return leave(rc);
}

int sperli_iprobe(sperli_t comm, int source, int tag, int *flag, sperli_status *status) {
    static const char fn[] = "sperli_iprobe";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_source(ci, source, fn, "rank")) ||
        (rc = check_rtag(tag, fn)) || (rc = check_null(flag, fn, "flag")) ||
        (rc = check_null(status, fn, "status")))
        return leave(rc);
    size_t n = 0;
    int found = 0, src = 0, gtag = 0;
    rc = gone(sperligo_iprobe((int)ci, source, tag, &found, &n, &src, &gtag), fn);
    if (rc == 0) {
        *flag = found;
        if (found) *status = (sperli_status){src, gtag, n};
    }
    return leave(rc);
}

int sperli_sendrecv(sperli_t comm, int dest, int sendtag, const void *data, size_t len,
                    int source, int recvtag, sperli_status *status) {
    static const char fn[] = "sperli_sendrecv";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_rank(ci, dest, fn, "dest")) ||
        (rc = check_tag(sendtag, fn)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_message(len, fn)) || (rc = check_source(ci, source, fn, "source")) ||
        (rc = check_rtag(recvtag, fn)) || (rc = check_null(status, fn, "status")))
        return leave(rc);
    size_t n = 0;
    int src = 0, gtag = 0;
    DONE;
    sperligo_sendrecv((int)ci, dest, sendtag, (void *)data, len, source, recvtag, &n, &src, &gtag, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made_status(rc, src, gtag, n, status));
}

/* ------------------------------------------------------------------------
 * Collectives
 */

int sperli_barrier(sperli_t comm) {
    static const char fn[] = "sperli_barrier";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    DONE;
    sperligo_barrier((int)ci, &done);
    return leave(gone(sperligo_wait(&done), fn));
}

int sperli_bcast(sperli_t comm, int root, const void *data, size_t len, size_t *result_len) {
    static const char fn[] = "sperli_bcast";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    if (root != comms[ci].rank) data = NULL, len = 0; /* ignored off the root */
    if ((rc = check_data(data, len, fn, "data")) || (rc = check_null(result_len, fn, "result_len")))
        return leave(rc);
    size_t n = 0;
    DONE;
    sperligo_bcast((int)ci, root, (void *)data, len, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made(rc, n, result_len));
}

int sperli_reduce(sperli_t comm, int root, int type, int reduction, const void *data,
                  size_t len, size_t *result_len) {
    static const char fn[] = "sperli_reduce";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_type(type, fn)) ||
        (rc = check_op(reduction, fn)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_null(result_len, fn, "result_len")))
        return leave(rc);
    size_t n = 0;
    DONE;
    sperligo_reduce((int)ci, root, type, reduction, (void *)data, len, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made(rc, n, result_len));
}

/* typed is sperli_allreduce and sperli_reduce_scatter: the reductions of
 * every rank's elements without a root (which = 0, 1). */
static int typed(int which, sperli_t comm, int type, int reduction, const void *data, size_t len,
                 size_t *result_len, const char *fn) {
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_type(type, fn)) ||
        (rc = check_op(reduction, fn)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_null(result_len, fn, "result_len")))
        return leave(rc);
    size_t n = 0;
    DONE;
    if (which == 0)
        sperligo_allreduce((int)ci, type, reduction, (void *)data, len, &n, &done);
    else
        sperligo_reduce_scatter((int)ci, type, reduction, (void *)data, len, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made(rc, n, result_len));
}

int sperli_allreduce(sperli_t comm, int type, int reduction, const void *data, size_t len,
                     size_t *result_len) {
    return typed(0, comm, type, reduction, data, len, result_len, "sperli_allreduce");
}

int sperli_reduce_scatter(sperli_t comm, int type, int reduction, const void *data, size_t len,
                          size_t *result_len) {
    return typed(1, comm, type, reduction, data, len, result_len, "sperli_reduce_scatter");
}

/* untyped is the collectives of bytes every rank gives: gather (which 0,
 * with its root), allgather (1), alltoall (2). */
static int untyped(int which, sperli_t comm, int root, const void *data, size_t len,
                   size_t *result_len, const char *fn) {
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_data(data, len, fn, "data")) ||
        (rc = check_null(result_len, fn, "result_len")))
        return leave(rc);
    size_t n = 0;
    DONE;
    if (which == 0)
        sperligo_gather((int)ci, root, (void *)data, len, &n, &done);
    else if (which == 1)
        sperligo_allgather((int)ci, (void *)data, len, &n, &done);
    else
        sperligo_alltoall((int)ci, (void *)data, len, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made(rc, n, result_len));
}

int sperli_gather(sperli_t comm, int root, const void *data, size_t len, size_t *result_len) {
    return untyped(0, comm, root, data, len, result_len, "sperli_gather");
}

int sperli_allgather(sperli_t comm, const void *data, size_t len, size_t *result_len) {
    return untyped(1, comm, 0, data, len, result_len, "sperli_allgather");
}

int sperli_alltoall(sperli_t comm, const void *data, size_t len, size_t *result_len) {
    return untyped(2, comm, 0, data, len, result_len, "sperli_alltoall");
}

int sperli_scatter(sperli_t comm, int root, const void *data, size_t len, size_t *result_len) {
    static const char fn[] = "sperli_scatter";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    if (root != comms[ci].rank) data = NULL, len = 0; /* ignored off the root */
    if ((rc = check_data(data, len, fn, "data")) || (rc = check_null(result_len, fn, "result_len")))
        return leave(rc);
    size_t n = 0;
    DONE;
    sperligo_scatter((int)ci, root, (void *)data, len, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    return leave(made(rc, n, result_len));
}

/* ------------------------------------------------------------------------
 * Communicators
 */

int sperli_split(sperli_t comm, int color, int key, sperli_t *newcomm) {
    static const char fn[] = "sperli_split";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(newcomm, fn, "newcomm"))) return leave(rc);
    comm_room(); /* before the call: the Go layer keeps the new one at index ncomms */
    int joinedc = 0, rank = 0, size = 0;
    DONE;
    sperligo_split((int)ci, color, key, (int)ncomms, &joinedc, &rank, &size, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) {
        if (joinedc) {
            comms[ncomms] = (struct comm){next_handle(), rank, size, 0};
            *newcomm = comms[ncomms++].h;
        } else {
            *newcomm = SPERLI_NONE;
        }
    }
    return leave(rc);
}

int sperli_comm_free(sperli_t comm) {
    static const char fn[] = "sperli_comm_free";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    if (ci == 0)
        return leave(fail(SPERLI_E_COMM, fn, "%d is the session: end it with sperli_finish", comm));
    comms[ci].freed = 1; /* whatever the code: the job's end frees it too */
    return leave(gone(sperligo_comm_free((int)ci), fn));
}

/* ------------------------------------------------------------------------
 * Losses (SPEC §10.3) and generations (§10.4)
 */

int sperli_set_on_loss(sperli_t comm, int mode) {
    static const char fn[] = "sperli_set_on_loss";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    if (mode != SPERLI_LOSS_RECOVER && mode != SPERLI_LOSS_RETURN)
        return leave(fail(SPERLI_E_MODE, fn, "mode %d is neither SPERLI_LOSS_RECOVER (0) nor SPERLI_LOSS_RETURN (1)",
                          mode));
    rc = gone(sperligo_set_on_loss((int)ci, mode), fn);
    if (rc == 0) s_loss_return = mode == SPERLI_LOSS_RETURN;
    return leave(rc);
}

/* ints is the output of sperli_failed and sperli_layout: n numbers the Go
 * layer wrote into buf when cap held them; SPERLI_E_LENGTH when not. */
static int ints(size_t n, size_t cap, size_t *len, const char *fn, const char *what) {
    *len = n;
    if (cap < n) return fail(SPERLI_E_LENGTH, fn, "room for %zu %s, there are %zu", cap, what, n);
    return 0;
}

/* check_ints: buf may be NULL only with a capacity of 0. */
static int check_ints(const int *buf, size_t cap, const char *fn, const char *what) {
    if (buf == NULL && cap > 0) return fail(SPERLI_E_NULL, fn, "%s is NULL with a capacity of %zu", what, cap);
    return 0;
}

int sperli_failed(sperli_t comm, int *ranks, size_t cap, size_t *n) {
    static const char fn[] = "sperli_failed";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_ints(ranks, cap, fn, "ranks")) ||
        (rc = check_null(n, fn, "n")))
        return leave(rc);
    size_t got = 0;
    /* No rank of a communicator is lost twice: its size bounds what is copied. */
    size_t room = cap < (size_t)comms[ci].size ? cap : (size_t)comms[ci].size;
    rc = gone(sperligo_failed((int)ci, ranks, room, &got), fn);
    if (rc) return leave(rc);
    return leave(ints(got, cap, n, fn, "ranks"));
}

int sperli_revoke(sperli_t comm) {
    static const char fn[] = "sperli_revoke";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    return leave(gone(sperligo_revoke((int)ci), fn));
}

int sperli_agree(sperli_t comm, uint64_t *flag) {
    static const char fn[] = "sperli_agree";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(flag, fn, "flag"))) return leave(rc);
    uint64_t v = *flag;
    DONE;
    sperligo_agree((int)ci, &v, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) *flag = v;
    return leave(rc);
}

/* regroup is sperli_shrink (grow 0) and sperli_grow (1). */
static int regroup(int grow, sperli_t comm, sperli_t *newcomm, const char *fn) {
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(comm, fn)) || (rc = check_null(newcomm, fn, "newcomm"))) return leave(rc);
    if (!s_loss_return)
        return leave(fail(SPERLI_E_MODE, fn,
                          "the job recovers its losses itself; call sperli_set_on_loss(s, SPERLI_LOSS_RETURN) first"));
    int movedc = 0;
    DONE;
    sperligo_regroup(grow, &movedc, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) {
        if (movedc) world();
        *newcomm = open_session;
    }
    return leave(rc);
}

int sperli_shrink(sperli_t comm, sperli_t *newcomm) { return regroup(0, comm, newcomm, "sperli_shrink"); }

int sperli_grow(sperli_t comm, sperli_t *newcomm) { return regroup(1, comm, newcomm, "sperli_grow"); }

int sperli_generation(sperli_t comm, uint32_t *gen) {
    static const char fn[] = "sperli_generation";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(gen, fn, "gen"))) return leave(rc);
    *gen = s_inc;
    return leave(0);
}

int sperli_slot(sperli_t comm, int *slot) {
    static const char fn[] = "sperli_slot";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(slot, fn, "slot"))) return leave(rc);
    *slot = s_slot;
    return leave(0);
}

int sperli_layout(sperli_t comm, int *slots_of, size_t cap, size_t *n) {
    static const char fn[] = "sperli_layout";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_ints(slots_of, cap, fn, "slots")) ||
        (rc = check_null(n, fn, "n")))
        return leave(rc);
    size_t got = 0;
    size_t room = cap < (size_t)s_size ? cap : (size_t)s_size;
    sperligo_layout(slots_of, room, &got);
    return leave(ints(got, cap, n, fn, "slots"));
}

/* ------------------------------------------------------------------------
 * Failure detection, abort, finish
 */

int sperli_set_silence(sperli_t comm, int ms) {
    static const char fn[] = "sperli_set_silence";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    if (ms < SPERLI_MIN_SILENCE_MS || ms > SPERLI_MAX_SILENCE_MS)
        return leave(fail(SPERLI_E_COUNT, fn, "%d ms is outside %d to %d", ms, SPERLI_MIN_SILENCE_MS,
                          SPERLI_MAX_SILENCE_MS));
    return leave(gone(sperligo_set_silence(ms), fn));
}

int sperli_heartbeat(sperli_t comm) {
    static const char fn[] = "sperli_heartbeat";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci))) return leave(rc);
    return leave(gone(sperligo_heartbeat(), fn));
}

int sperli_abort(sperli_t session) {
    static const char fn[] = "sperli_abort";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(session, fn))) return leave(rc);
    rc = gone(sperligo_abort(), fn);
    end_session();
    return leave(rc);
}

int sperli_finish(sperli_t session) {
    static const char fn[] = "sperli_finish";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(session, fn))) return leave(rc);
    if (nopen > 0)
        return leave(fail(SPERLI_E_OPEN, fn, "%zu operation(s) still open; finish them first", nopen));
    DONE;
    sperligo_finish(&done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc != SPERLI_E_RECOVERED) end_session();
    return leave(rc);
}

/* ------------------------------------------------------------------------
 * Checkpoints
 */

int sperli_use_checkpoints(sperli_t session, const char *dir) {
    static const char fn[] = "sperli_use_checkpoints";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(session, fn)) || (rc = check_null(dir, fn, "dir"))) return leave(rc);
    if (strnlen(dir, SPERLI_MAX_PATH + 1) > SPERLI_MAX_PATH)
        return leave(fail(SPERLI_E_PATH, fn, "dir is longer than %d bytes", SPERLI_MAX_PATH));
    return leave(gone(sperligo_use_checkpoints((char *)dir), fn));
}

int sperli_checkpoint(sperli_t session, const void *state, size_t len) {
    static const char fn[] = "sperli_checkpoint";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(session, fn)) || (rc = check_data(state, len, fn, "state")))
        return leave(rc);
    /* PTRDIFF_MAX: the most a Go slice holds, below the limit on 64 bits */
    if ((uint64_t)len > SPERLI_MAX_CHECKPOINT || len > (size_t)PTRDIFF_MAX)
        return leave(fail(SPERLI_E_LENGTH, fn, "state is %zu bytes, limit %llu", len,
                          (unsigned long long)SPERLI_MAX_CHECKPOINT));
    DONE;
    sperligo_checkpoint((void *)state, len, &done);
    return leave(gone(sperligo_wait(&done), fn));
}

int sperli_resume(sperli_t session, int *resumed, size_t *len) {
    static const char fn[] = "sperli_resume";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_session(session, fn)) || (rc = check_null(resumed, fn, "resumed")) ||
        (rc = check_null(len, fn, "len")))
        return leave(rc);
    int found = 0;
    size_t n = 0;
    DONE;
    sperligo_resume(&found, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc >= 0) *resumed = found;
    return leave(made(rc, n, len));
}

/* ------------------------------------------------------------------------
 * Results, codes, the end
 */

int sperli_result(sperli_t comm, void *buf, size_t cap, size_t *len) {
    static const char fn[] = "sperli_result";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(len, fn, "len")) ||
        (rc = check_data(buf, cap, fn, "buf")))
        return leave(rc);
    *len = s_result_len;
    if (cap < s_result_len)
        return leave(fail(SPERLI_E_LENGTH, fn, "buffer of %zu bytes, the result is %zu", cap,
                          s_result_len));
    return leave(gone(sperligo_result(buf, s_result_len), fn));
}

static const char *ename(int code) {
    switch (code) {
    case SPERLI_E_NULL: return "SPERLI_E_NULL";
    case SPERLI_E_LENGTH: return "SPERLI_E_LENGTH";
    case SPERLI_E_RANK: return "SPERLI_E_RANK";
    case SPERLI_E_TAG: return "SPERLI_E_TAG";
    case SPERLI_E_TYPE: return "SPERLI_E_TYPE";
    case SPERLI_E_OP: return "SPERLI_E_OP";
    case SPERLI_E_COUNT: return "SPERLI_E_COUNT";
    case SPERLI_E_HANDLE: return "SPERLI_E_HANDLE";
    case SPERLI_E_PATH: return "SPERLI_E_PATH";
    case SPERLI_E_BUSY: return "SPERLI_E_BUSY";
    case SPERLI_E_OPERATION: return "SPERLI_E_OPERATION";
    case SPERLI_E_FINISHED: return "SPERLI_E_FINISHED";
    case SPERLI_E_OPEN: return "SPERLI_E_OPEN";
    case SPERLI_E_SESSION: return "SPERLI_E_SESSION";
    case SPERLI_E_FORK: return "SPERLI_E_FORK";
    case SPERLI_E_COMM: return "SPERLI_E_COMM";
    case SPERLI_E_RECOVERED: return "SPERLI_E_RECOVERED";
    case SPERLI_E_MODE: return "SPERLI_E_MODE";
    }
    return "SPERLI_E_?";
}

const char *sperli_strerror(int code) {
    switch (code) {
    case SPERLI_OK: return "ok";
    case SPERLI_E_NULL: return "SPERLI_E_NULL: a pointer argument is NULL";
    case SPERLI_E_LENGTH: return "SPERLI_E_LENGTH: a length outside its range, or a buffer too short";
    case SPERLI_E_RANK: return "SPERLI_E_RANK: rank outside the job";
    case SPERLI_E_TAG: return "SPERLI_E_TAG: tag outside 0 to 2147483647";
    case SPERLI_E_TYPE: return "SPERLI_E_TYPE: unknown element type";
    case SPERLI_E_OP: return "SPERLI_E_OP: unknown reduction";
    case SPERLI_E_COUNT: return "SPERLI_E_COUNT: a count outside its range";
    case SPERLI_E_HANDLE: return "SPERLI_E_HANDLE: not the open session";
    case SPERLI_E_PATH: return "SPERLI_E_PATH: path too long";
    case SPERLI_E_BUSY: return "SPERLI_E_BUSY: another call of the library is running";
    case SPERLI_E_OPERATION: return "SPERLI_E_OPERATION: not an open operation of this kind";
    case SPERLI_E_FINISHED: return "SPERLI_E_FINISHED: the rank has finished";
    case SPERLI_E_OPEN: return "SPERLI_E_OPEN: operations are still open";
    case SPERLI_E_SESSION: return "SPERLI_E_SESSION: a session is open already";
    case SPERLI_E_FORK: return "SPERLI_E_FORK: called in the child of a fork(2)";
    case SPERLI_E_COMM: return "SPERLI_E_COMM: a communicator this call cannot take (freed, made by split in an earlier generation, or made by split where the session is wanted)";
    case SPERLI_E_RECOVERED: return "SPERLI_E_RECOVERED: a rank was lost and the job recovered in place; call sperli_resume";
    case SPERLI_E_MODE: return "SPERLI_E_MODE: a loss mode none of SPERLI_LOSS_RECOVER, SPERLI_LOSS_RETURN, or shrink and grow without SPERLI_LOSS_RETURN";
    case SPERLI_NOT_NEEDED: return "SPERLI_NOT_NEEDED: a spare the job finished without (exit with status 0)";
    case 1601: return "H1601: peer certificate refused: none, another CA, wrong name or address, not TLS 1.3";
    case 1602: return "H1602: hello missing or malformed";
    case 1603: return "H1603: token signature does not verify";
    case 1604: return "H1604: token expired";
    case 1605: return "H1605: token of another job";
    case 1606: return "H1606: token of another rank";
    case 1607: return "H1607: token's size, incarnation or host does not match";
    case 1608: return "H1608: frame payload over 16 MiB";
    case 1609: return "H1609: frame header malformed, or from the wrong source";
    case 1610: return "H1610: peer not reachable within the dial window (30 s)";
    case 1611: return "H1611: peer lost: silence limit passed, or connection broke without bye";
    case 1612: return "H1612: job ended by another rank (its abort, loss or error)";
    case 1613: return "H1613: collective does not match across ranks";
    case 1614: return "H1614: host refused (refused, reserved or denied name)";
    case 1615: return "H1615: job description missing or malformed";
    case 1616: return "H1616: argument outside its range (rank, tag, size of a message)";
    case 1617: return "H1617: call on a communicator that is finished or aborted";
    case 1618: return "H1618: wrong collective call (every rank returns it; the job goes on)";
    case 1619: return "H1619: no usable checkpoint epoch";
    case 1620: return "H1620: COMMIT signature does not verify";
    case 1621: return "H1621: checkpoint state damaged and no good buddy copy";
    case 1622: return "H1622: checkpoint header does not match the COMMIT or the job";
    case 1623: return "H1623: resume with another job size";
    case 1624: return "H1624: checkpoint while a send or receive is open";
    case 1625: return "H1625: checkpoint storage failed (write, sync, rename, space)";
    case 1626: return "H1626: communicator revoked";
    case 1627: return "H1627: protocol violation by a joined peer (credit, sizes, records or files that contradict the protocol)";
    case 1628: return "H1628: slots run different programs, arguments or loss policies";
    }
    return "unknown code";
}

int sperli_last_error(char *buf, size_t cap, size_t *len) {
    /* Its own answers never replace the last error: it is what is asked for. */
    int rc;
    if ((rc = enter()) != 0) return rc;
    if (len == NULL || (buf == NULL && cap > 0)) return leave(SPERLI_E_NULL);
    char tmp[1];
    size_t n;
    if (last_code == 0) {
        n = 0;
    } else if (last_from_go) {
        n = sperligo_error(tmp, 0);
    } else {
        n = strlen(last_msg);
    }
    *len = n;
    if (cap < n + 1) return leave(SPERLI_E_LENGTH);
    /* Only n + 1 bytes are written: a larger capacity (any size_t, even
     * SIZE_MAX) is never handed on. */
    if (last_code == 0)
        buf[0] = 0;
    else if (last_from_go)
        sperligo_error(buf, n + 1);
    else
        memcpy(buf, last_msg, n + 1);
    return leave(0);
}

int sperli_exit(sperli_t session, int code, int *status) {
    static const char fn[] = "sperli_exit";
    int rc;
    if ((rc = enter()) != 0) return rc;
    if (session != SPERLI_NONE || open_session != 0)
        if ((rc = check_session(session, fn))) return leave(rc);
    if ((rc = check_null(status, fn, "status"))) return leave(rc);
    const char *msg = NULL;
    if (code != 0 && code == last_code && !last_from_go) msg = last_msg;
    else if (code < 0 && code >= SPERLI_E_MODE) msg = sperli_strerror(code);
    int st = sperligo_exit(code, (char *)msg);
    if (st != 0 && st != 1 && st != 75) broken("exit status", st);
    end_session();
    *status = st;
    return leave(0);
}

/* ------------------------------------------------------------------------
 * Work queues (SPEC §19). The table's index is the Go layer's; a queue
 * belongs to the generation it was started in (s_inc then), and the table
 * is emptied when a later queue is started in another generation or the
 * session ends (the Go layer follows the index it is given).
 */

struct work {
    sperli_work h;
    long ci;       /* its communicator */
    uint32_t inc;  /* the generation it was started in */
    int64_t n;     /* items */
    int64_t held;  /* the task this rank holds, or -1 */
    int ended;     /* sperli_work_next gave -1 */
};
static struct work *works;
static size_t capworks;
static sperli_work last_work; /* handles are never reused */

static int check_work(sperli_work h, const char *fn, struct work **w) {
    for (size_t i = 0; i < nworks; i++)
        if (works[i].h == h) {
            if (works[i].inc != s_inc || open_session == 0)
                return fail(SPERLI_E_HANDLE, fn, "work queue %lld was started in generation %u; the session is in generation %u now (start it again: it goes on from its log)",
                            (long long)h, works[i].inc, s_inc);
            *w = &works[i];
            return 0;
        }
    return fail(SPERLI_E_HANDLE, fn, "%lld is no work queue of this session", (long long)h);
}

int sperli_work_start(sperli_t comm, const char *name, const void *const *items,
                      const size_t *lens, size_t n, sperli_work *wq) {
    static const char fn[] = "sperli_work_start";
    int rc;
    long ci;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_comm(comm, fn, &ci)) || (rc = check_null(name, fn, "name")) ||
        (rc = check_null(items, fn, "items")) || (rc = check_null(lens, fn, "lens")))
        return leave(rc);
    size_t nl = strnlen(name, SPERLI_MAX_WORK_NAME + 1);
    if (nl > SPERLI_MAX_WORK_NAME)
        return leave(fail(SPERLI_E_LENGTH, fn, "name is longer than %d bytes", SPERLI_MAX_WORK_NAME));
    if (n == 0 || n > SPERLI_MAX_WORK_ITEMS)
        return leave(fail(SPERLI_E_COUNT, fn, "%zu items, want 1 … %d", n, SPERLI_MAX_WORK_ITEMS));
    for (size_t i = 0; i < n; i++) {
        if (items[i] == NULL && lens[i] > 0)
            return leave(fail(SPERLI_E_NULL, fn, "items[%zu] is NULL with a length of %zu bytes", i, lens[i]));
        if (lens[i] > SPERLI_MAX_MESSAGE)
            return leave(fail(SPERLI_E_LENGTH, fn, "items[%zu] is %zu bytes, at most %d", i, lens[i], SPERLI_MAX_MESSAGE));
    }
    if ((rc = check_null(wq, fn, "wq"))) return leave(rc);
    if (nworks > 0 && works[0].inc != s_inc) nworks = 0; /* another generation's */
    if (nworks == capworks) {
        size_t cap = capworks ? capworks * 2 : 8;
        struct work *p = realloc(works, cap * sizeof *p);
        if (p == NULL) broken("no memory for the table of work queues", 0);
        works = p;
        capworks = cap;
    }
    DONE;
    sperligo_work_start((int)ci, (long)nworks, (char *)name, (void **)items, (size_t *)lens, n, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) {
        works[nworks] = (struct work){++last_work, ci, s_inc, (int64_t)n, -1, 0};
        *wq = works[nworks++].h;
    }
    return leave(rc);
}

int sperli_work_next(sperli_work wq, int64_t *id, size_t *len) {
    static const char fn[] = "sperli_work_next";
    int rc;
    struct work *w;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_work(wq, fn, &w)) || (rc = check_null(id, fn, "id")) || (rc = check_null(len, fn, "len")))
        return leave(rc);
    if (w->held >= 0)
        return leave(fail(SPERLI_E_OPERATION, fn, "task %lld is not done: give its result (sperli_work_done) first", (long long)w->held));
    if (w->ended) {
        *id = -1;
        return leave(made(0, 0, len));
    }
    int64_t got = -1;
    size_t n = 0;
    DONE;
    sperligo_work_next((long)(w - works), &got, &n, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) {
        if (got < 0) w->ended = 1;
        else w->held = got;
        *id = got;
    }
    return leave(made(rc, n, len));
}

int sperli_work_done(sperli_work wq, int64_t id, const void *result, size_t len) {
    static const char fn[] = "sperli_work_done";
    int rc;
    struct work *w;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_work(wq, fn, &w))) return leave(rc);
    if (w->held < 0 || id != w->held)
        return leave(fail(SPERLI_E_OPERATION, fn, "task %lld is not the one this rank holds", (long long)id));
    if ((rc = check_data(result, len, fn, "result"))) return leave(rc);
    if (len > SPERLI_MAX_WORK_RESULT)
        return leave(fail(SPERLI_E_LENGTH, fn, "a result of %zu bytes, at most %d", len, SPERLI_MAX_WORK_RESULT));
    DONE;
    sperligo_work_done((long)(w - works), (void *)result, len, &done);
    rc = gone(sperligo_wait(&done), fn);
    if (rc == 0) w->held = -1;
    return leave(rc);
}

int sperli_work_result(sperli_work wq, int64_t id, size_t *len) {
    static const char fn[] = "sperli_work_result";
    int rc;
    struct work *w;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_work(wq, fn, &w)) || (rc = check_null(len, fn, "len"))) return leave(rc);
    if (!w->ended)
        return leave(fail(SPERLI_E_OPERATION, fn, "the queue has not ended: take its tasks until sperli_work_next gives -1"));
    if (id < 0 || id >= w->n)
        return leave(fail(SPERLI_E_COUNT, fn, "item %lld, the queue has %lld", (long long)id, (long long)w->n));
    size_t n = 0;
    rc = gone(sperligo_work_result((long)(w - works), id, &n), fn);
    return leave(made(rc, n, len));
}

int sperli_work_stats(sperli_work wq, sperli_work_statistics *st) {
    static const char fn[] = "sperli_work_stats";
    int rc;
    struct work *w;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_work(wq, fn, &w)) || (rc = check_null(st, fn, "st"))) return leave(rc);
    int64_t v[5];
    sperligo_work_stats((long)(w - works), v);
    *st = (sperli_work_statistics){v[0], v[1], v[2], v[3], v[4]};
    return leave(0);
}

int sperli_work_by_rank(sperli_work wq, int64_t slot, int64_t *executed) {
    static const char fn[] = "sperli_work_by_rank";
    int rc;
    struct work *w;
    if ((rc = enter()) != 0) return rc;
    if ((rc = check_work(wq, fn, &w)) || (rc = check_null(executed, fn, "executed"))) return leave(rc);
    int64_t n = sperligo_work_by_rank((long)(w - works), slot);
    if (n < 0) return leave(fail(SPERLI_E_COUNT, fn, "slot %lld, the job has no such slot", (long long)slot));
    *executed = n;
    return leave(0);
}
