/*
 * fuzz_sperli — a random-API fuzzer of libsperli's C layer: a seeded loop
 * that calls every function of sperli.h with arguments drawn from right
 * and wrong values (handles made up or ended, communicators made by split,
 * freed or given where the session is wanted, ranks and tags with the
 * wildcards, lengths up to SIZE_MAX, NULL pointers, operation handles of
 * the other kind or finished, capacities of any size), and holds each
 * answer against the header's table, computed here from the arguments in
 * the header's order and from a model of the session (a job of one rank:
 * its communicators, each with the messages it sent itself in arrival
 * order and its posted receives in post order, matched as the header
 * says; open operations, the kept result, checkpoints). On a negative code it
 * also checks that no out argument was written and that the kept result
 * stayed; on 0 that the outs and the result are the model's. Now and then
 * it forks and wants SPERLI_E_FORK from the child. It never makes a call
 * that would wait for ever (a receive or probe from any source with no
 * message for it; one from rank 0, itself, is SPERLI_E_FINISHED at once).
 *
 *   fuzz_sperli SEED SECONDS ONE.job CKPTDIR < /dev/null
 *
 * ONE.job is rank 0 of a job of one rank (`sperli job make -n 1`), CKPTDIR
 * an empty directory. It prints each mismatch on standard output (with
 * the seed and the call's number: FUZZ_TRACE=N prints the calls from the
 * N-th on), stops at the first 20, and ends with "fuzz_sperli: ok (…)" and
 * exit status 0 when there was none. The library's own lines (sperli_exit's
 * messages) go to standard error. Run by scripts/libsperli/fuzz-libsperli.sh.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sperli.h"

/* ------------------------------------------------------------------------
 * Randomness: xorshift64*, from the seed alone.
 */

static uint64_t rng;

static uint64_t next64(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static uint32_t below(uint32_t n) { return (uint32_t)(next64() % n); }
static int chance(int pct) { return (int)below(100) < pct; }

/* ------------------------------------------------------------------------
 * Checks
 */

static uint64_t seed, ncall, nchecks;
static int mismatches;
static long trace_from = -1;
static const char *fname = "";

#define FAIL(...)                                                                          \
    do {                                                                                   \
        mismatches++;                                                                      \
        printf("fuzz_sperli: seed %llu call %llu %s: ", (unsigned long long)seed,          \
               (unsigned long long)ncall, fname);                                          \
        printf(__VA_ARGS__);                                                               \
        printf("\n");                                                                      \
        fflush(stdout);                                                                    \
        if (mismatches >= 20) exit(1);                                                     \
    } while (0)

#define WANT(got, want)                                                                    \
    do {                                                                                   \
        int g_ = (got), w_ = (want);                                                       \
        nchecks++;                                                                         \
        if (g_ != w_) FAIL("code %d (%s), want %d (%s)", g_, sperli_strerror(g_), w_,      \
                           sperli_strerror(w_));                                           \
    } while (0)

#define TRUE(cond)                                                                         \
    do {                                                                                   \
        nchecks++;                                                                         \
        if (!(cond)) FAIL("%s does not hold", #cond);                                      \
    } while (0)

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
    case SPERLI_E_OPERATION: return "SPERLI_E_OPERATION";
    case SPERLI_E_FINISHED: return "SPERLI_E_FINISHED";
    case SPERLI_E_OPEN: return "SPERLI_E_OPEN";
    case SPERLI_E_SESSION: return "SPERLI_E_SESSION";
    case SPERLI_E_COMM: return "SPERLI_E_COMM";
    case SPERLI_E_MODE: return "SPERLI_E_MODE";
    }
    return NULL;
}

/* check_last: after a nonzero code of a function other than
 * sperli_last_error, the last error's message begins with the code's name
 * and, for a negative code, the function's name. */
static void check_last(int rc) {
    static char buf[8192];
    size_t n = 0;
    if (rc == 0 || !chance(25)) return;
    WANT(sperli_last_error(buf, sizeof buf, &n), 0);
    char want[96];
    if (rc < 0)
        snprintf(want, sizeof want, "%s: %s: ", ename(rc) ? ename(rc) : "?", fname);
    else
        snprintf(want, sizeof want, "H%d: ", rc);
    nchecks++;
    if (strncmp(buf, want, strlen(want)) != 0 || strlen(buf) != n)
        FAIL("last error %.80s (%zu bytes), want it to begin with %s", buf, n, want);
}

/* ------------------------------------------------------------------------
 * The model of the session: a job of one rank.
 */

#define SENT_I 0x5a5a5a5a
#define SENT_Z ((size_t)0x5a5a5a5a5a5a5a5aULL)
#define SENT_OP ((sperli_op)0x3c3c3c3c3c3c3c3cLL)

enum { NTAGS = 4, MAXOPS = 48, NSTALE = 32, MAXCOMMS = 10, POOL = 1 << 20 };
static const int tags[NTAGS] = {0, 1, 7, SPERLI_MAX_TAG};

struct buf {
    unsigned char *p;
    size_t n;
};

struct op {
    sperli_op h;
    int kind;    /* 1 send, 2 receive */
    int comm;    /* the model communicator that started it */
    int tag;     /* a receive's: a tag or SPERLI_ANY_TAG */
    int matched; /* a receive with its message */
    int got_tag; /* that message's tag */
    struct buf m;
};

/* kmsg is a message kept for a later receive, with its tag. */
struct kmsg {
    int tag;
    struct buf m;
};

/* A communicator of the model: the world (index 0, the session's handle)
 * or one made by split. Each has its own kept messages (in arrival order)
 * and posted receives (op indices, in post order): the job has one rank,
 * so every message is from rank 0 of its communicator to itself. */
struct mcomm {
    sperli_t h;
    int freed;
    struct kmsg *kept;
    size_t nkept, capkept;
    int pend[MAXOPS];
    int npend;
};

static const char *one_line, *ckpt_dir;
static char job_id[SPERLI_JOB_ID_LEN + 1];
static sperli_t sess;          /* the open session, 0: none */
static sperli_t stale_s[16];   /* handles of ended sessions and their communicators */
static int nstale_s;
static sperli_t last_given;    /* the largest handle given: every new one is larger */
static struct mcomm mc[MAXCOMMS];
static int nmc;
static struct op ops[MAXOPS];
static int nops;
static sperli_op stale_op[NSTALE];
static int nstale_op;
static struct buf res;         /* the kept result */
static int ckpt_used;          /* this session named the checkpoint directory */
static int loss_return;        /* this session set SPERLI_LOSS_RETURN */
static uint64_t nrevoked;      /* communicators revoked and freed */
/* The checkpoint directory, across sessions: committed epochs and their
 * states. A session counts epochs from the one it resumed (0 without a
 * resume): its checkpoint writes the next one, replacing an epoch of that
 * number an earlier session left, and prunes those below the one before
 * it; a resume takes the newest epoch there is. */
enum { MAXEPOCHS = 8 };
static struct {
    uint64_t e;
    struct buf state;
} epochs[MAXEPOCHS];
static int nepochs;
static uint64_t sess_epoch;    /* the session's last committed or resumed epoch */
static int aborted;            /* the last session ended by sperli_abort (since the last init) */
static unsigned char pool[POOL];
static unsigned char *big;     /* SPERLI_MAX_MESSAGE bytes */
static size_t queued;          /* bytes kept */

static struct buf copy_of(const void *p, size_t n) {
    struct buf b = {malloc(n ? n : 1), n};
    if (n) memcpy(b.p, p, n);
    return b;
}

static void set_result(struct buf b) {
    free(res.p);
    res = b;
}

static int tag_fits(int want, int tag) { return want == SPERLI_ANY_TAG || want == tag; }

static void forget_op(sperli_op h) {
    if (nstale_op < NSTALE)
        stale_op[nstale_op++] = h;
    else
        stale_op[below(NSTALE)] = h;
}

static void forget_handle(sperli_t h) {
    if (nstale_s < 16)
        stale_s[nstale_s++] = h;
    else
        stale_s[below(16)] = h;
}

static void drop_op(int i) {
    forget_op(ops[i].h);
    free(ops[i].m.p);
    /* fix the indices of the pending receives */
    for (int c = 0; c < nmc; c++) {
        int k = 0;
        for (int j = 0; j < mc[c].npend; j++) {
            if (mc[c].pend[j] == i) continue;
            mc[c].pend[k++] = mc[c].pend[j] > i ? mc[c].pend[j] - 1 : mc[c].pend[j];
        }
        mc[c].npend = k;
    }
    memmove(&ops[i], &ops[i + 1], (size_t)(nops - i - 1) * sizeof ops[0]);
    nops--;
}

/* find_kept is the index of the first kept message of c that fits tag, or -1. */
static long find_kept(int c, int tag) {
    for (size_t k = 0; k < mc[c].nkept; k++)
        if (tag_fits(tag, mc[c].kept[k].tag)) return (long)k;
    return -1;
}

static struct kmsg take_kept(int c, long k) {
    struct kmsg m = mc[c].kept[k];
    memmove(&mc[c].kept[k], &mc[c].kept[k + 1], (mc[c].nkept - (size_t)k - 1) * sizeof m);
    mc[c].nkept--;
    queued -= m.m.n;
    return m;
}

/* arrive is a message on communicator c: to the receive posted first of
 * those it fits, else kept. */
static void arrive(int c, int tag, const void *p, size_t n) {
    for (int j = 0; j < mc[c].npend; j++) {
        struct op *o = &ops[mc[c].pend[j]];
        if (!tag_fits(o->tag, tag)) continue;
        memmove(&mc[c].pend[j], &mc[c].pend[j + 1], (size_t)(mc[c].npend - j - 1) * sizeof mc[c].pend[0]);
        mc[c].npend--;
        o->matched = 1;
        o->got_tag = tag;
        o->m = copy_of(p, n);
        return;
    }
    if (mc[c].nkept == mc[c].capkept) {
        mc[c].capkept = mc[c].capkept ? 2 * mc[c].capkept : 8;
        mc[c].kept = realloc(mc[c].kept, mc[c].capkept * sizeof *mc[c].kept);
    }
    mc[c].kept[mc[c].nkept++] = (struct kmsg){tag, copy_of(p, n)};
    queued += n;
}

static void session_ended(void) {
    while (nops > 0) drop_op(nops - 1);
    for (int c = 0; c < nmc; c++) {
        forget_handle(mc[c].h);
        while (mc[c].nkept > 0) free(take_kept(c, 0).m.p);
        mc[c].npend = 0;
        mc[c].freed = 0;
    }
    nmc = 0;
    sess = 0;
    set_result((struct buf){NULL, 0});
    ckpt_used = 0;
    loss_return = 0;
    sess_epoch = 0;
}

/* new_handle checks a handle the library just gave: > 0, larger than every
 * one before (never reused). */
static int new_handle(sperli_t h) {
    int ok = h > 0 && h > last_given;
    last_given = h;
    return ok;
}

/* ------------------------------------------------------------------------
 * Arguments
 */

/* arg_handle is a session or communicator handle: mostly the session or
 * one of its communicators (freed ones too), else a wrong one. */
static sperli_t arg_handle(void) {
    if (sess != 0 && chance(70)) return sess;
    if (sess != 0 && nmc > 1 && chance(75)) return mc[1 + below((uint32_t)nmc - 1)].h;
    switch (below(7)) {
    case 0: return 0;
    case 1: return -1;
    case 2: return INT_MIN;
    case 3: return INT_MAX;
    case 4: return nstale_s ? stale_s[below((uint32_t)nstale_s)] : 12345;
    case 5: return last_given + 1;
    }
    return (sperli_t)next64();
}

/* comm_of is the model index of handle h of the open session, or -1. */
static int comm_of(sperli_t h) {
    if (sess == 0 || h <= 0) return -1;
    for (int c = 0; c < nmc; c++)
        if (mc[c].h == h) return c;
    return -1;
}

/* want_comm is the code for h given to a function that takes any
 * communicator: 0 (and *ci), SPERLI_E_HANDLE or SPERLI_E_COMM. */
static int want_comm(sperli_t h, int *ci) {
    int c = comm_of(h);
    if (c < 0) return SPERLI_E_HANDLE;
    if (mc[c].freed) return SPERLI_E_COMM;
    *ci = c;
    return 0;
}

/* want_session is it for a function that takes the session only. */
static int want_session(sperli_t h) {
    int c = comm_of(h);
    return c < 0 ? SPERLI_E_HANDLE : c > 0 ? SPERLI_E_COMM : 0;
}

/* arg_rank is a destination (wild 0) or a source (wild 1: SPERLI_ANY_SOURCE
 * is right too). */
static int arg_rank(int wild) {
    if (chance(85)) return wild && chance(40) ? SPERLI_ANY_SOURCE : 0;
    static const int bad[] = {1, 2, -1, -2, INT_MIN, INT_MAX, 4096};
    return chance(80) ? bad[below(7)] : (int)next64();
}

static int rank_ok(int r, int wild) { return r == 0 || (wild && r == SPERLI_ANY_SOURCE); }

static int arg_tag(int wild) {
    if (chance(88)) return wild && chance(30) ? SPERLI_ANY_TAG : tags[below(NTAGS)];
    static const int bad[] = {-1, -2, INT_MIN, -2147483647};
    return chance(70) ? bad[below(4)] : (int)(next64() | 0x80000000u);
}

static int tag_ok(int t, int wild) { return t >= 0 || (wild && t == SPERLI_ANY_TAG); }

/* arg_len is a length and the buffer it goes with: a real buffer of at
 * least that length whenever the length is one the library may read. */
static size_t arg_len(size_t limit, const void **data) {
    size_t n;
    switch (below(12)) {
    case 0: n = 0; break;
    case 1: n = chance(5) ? limit : below(64); break; /* the limit itself, now and then */
    case 2: n = limit + 1; break;
    case 3: n = SIZE_MAX; break;
    case 4: n = (size_t)1 << 63; break;
    case 5: n = limit + 1 + (next64() % ((size_t)1 << 40)); break;
    case 6: n = 1 + below(64 << 10); break;
    default: n = below(200); break;
    }
    if (n > SPERLI_MAX_MESSAGE + 64 && n <= limit) n = below(64); /* no buffer that long */
    /* a length over the limit is never read: any buffer will do */
    *data = n <= POOL - 64 ? (const void *)(pool + below(64)) : n <= SPERLI_MAX_MESSAGE + 64 ? big : pool;
    if (chance(6)) *data = NULL;
    return n;
}

static sperli_op arg_op(int kind) {
    int k = (int)below(10);
    if (k < 6 && nops > 0) {
        /* one of the right kind, if there is one */
        for (int tries = 0; tries < 4; tries++) {
            int i = (int)below((uint32_t)nops);
            if (ops[i].kind == kind || tries == 3) return ops[i].h;
        }
    }
    if (k < 8 && nstale_op > 0) return stale_op[below((uint32_t)nstale_op)];
    static const sperli_op bad[] = {0, -1, 1, INT64_MAX, INT64_MIN, 12345, ((sperli_op)1 << 32) | 1};
    return chance(60) ? bad[below(7)] : (sperli_op)next64();
}

static int find_op(sperli_op h) {
    for (int i = 0; i < nops; i++)
        if (ops[i].h == h) return i;
    return -1;
}

/* ------------------------------------------------------------------------
 * The calls. Each computes the code the header's table gives, makes the
 * call, and checks the answer and what changed.
 */

static int first(int a, int b) { return a != 0 ? a : b; }

static int same_status(sperli_status st, int src, int tag, size_t len) {
    return st.source == src && st.tag == tag && st.len == len;
}

static const sperli_status SENT_ST = {SENT_I, SENT_I, SENT_Z};

static void check_result_kept(void) {
    /* the kept result is the model's */
    size_t n = SENT_Z;
    unsigned char *b = malloc(res.n + 1);
    WANT(sperli_result(sess, b, res.n + 1, &n), 0);
    TRUE(n == res.n && (res.n == 0 || memcmp(b, res.p, res.n) == 0));
    free(b);
}

static void f_info(void) {
    sperli_t s = arg_handle();
    int ci = 0;
    int w = want_comm(s, &ci);
    int i = SENT_I;
    uint32_t u = SENT_I;
    char buf[64];
    memset(buf, 'Z', sizeof buf);
    int nul = chance(10);
    int rc;
    switch (below(4)) {
    case 0:
        fname = "sperli_rank";
        WANT(rc = sperli_rank(s, nul ? NULL : &i), first(w, nul ? SPERLI_E_NULL : 0));
        TRUE(w || nul ? i == SENT_I : i == 0);
        break;
    case 1:
        fname = "sperli_size";
        WANT(rc = sperli_size(s, nul ? NULL : &i), first(w, nul ? SPERLI_E_NULL : 0));
        TRUE(w || nul ? i == SENT_I : i == 1);
        break;
    case 2: {
        fname = "sperli_incarnation";
        WANT(rc = sperli_incarnation(s, nul ? NULL : &u), first(w, nul ? SPERLI_E_NULL : 0));
        TRUE(w || nul ? u == (uint32_t)SENT_I : u == 0);
        break;
    }
    default: {
        fname = "sperli_job";
        size_t cap = chance(70) ? 33 + below(31) : (chance(50) ? below(33) : SIZE_MAX);
        if (cap > sizeof buf && cap != SIZE_MAX) cap = sizeof buf;
        int want = first(w, nul ? SPERLI_E_NULL : cap < 33 ? SPERLI_E_LENGTH : 0);
        rc = sperli_job(s, nul ? NULL : buf, cap);
        WANT(rc, want);
        if (want == 0)
            TRUE(strcmp(buf, job_id) == 0);
        else
            TRUE(buf[0] == 'Z');
        break;
    }
    }
    check_last(rc);
}

static void f_send(int start) {
    fname = start ? "sperli_start_send" : "sperli_send";
    sperli_t s = arg_handle();
    int ci = 0;
    int dest = arg_rank(0), tag = arg_tag(0);
    const void *data;
    size_t len = arg_len(SPERLI_MAX_MESSAGE, &data);
    if (!start && len > 64 && queued > (8u << 20)) len = 7;
    int opnull = start && chance(6);
    sperli_op op = SENT_OP;
    int want = first(want_comm(s, &ci), !rank_ok(dest, 0)             ? SPERLI_E_RANK
                                        : !tag_ok(tag, 0)             ? SPERLI_E_TAG
                                        : data == NULL && len > 0     ? SPERLI_E_NULL
                                        : len > SPERLI_MAX_MESSAGE    ? SPERLI_E_LENGTH
                                        : opnull                      ? SPERLI_E_NULL
                                        : start && nops >= MAXOPS     ? -100 /* the model's table is full */
                                                                      : 0);
    if (want == -100) return;
    int rc = start ? sperli_start_send(s, dest, tag, data, len, opnull ? NULL : &op)
                   : sperli_send(s, dest, tag, data, len);
    WANT(rc, want);
    if (start) TRUE(rc == 0 ? op != SENT_OP && op > 0 && find_op(op) < 0 : op == SENT_OP);
    if (rc == 0 && want == 0) {
        arrive(ci, tag, data, len);
        if (start) ops[nops++] = (struct op){op, 1, ci, tag, 0, 0, {NULL, 0}};
    }
    check_last(rc);
}

/* f_recv: sperli_recv or sperli_recv_from. From rank 0, this rank itself,
 * with no message that fits it is SPERLI_E_FINISHED at once; from any
 * source it would wait for ever, and is not made. */
static void f_recv(void) {
    int from = chance(50);
    fname = from ? "sperli_recv_from" : "sperli_recv";
    sperli_t s = arg_handle();
    int ci = 0;
    int src = arg_rank(1), tag = arg_tag(1);
    int nul = chance(6);
    size_t n = SENT_Z;
    sperli_status st = SENT_ST;
    int want = first(want_comm(s, &ci), !rank_ok(src, 1) ? SPERLI_E_RANK
                                        : !tag_ok(tag, 1) ? SPERLI_E_TAG
                                        : nul             ? SPERLI_E_NULL
                                                          : 0);
    long k = want == 0 ? find_kept(ci, tag) : -1;
    if (want == 0 && k < 0) {
        if (src == SPERLI_ANY_SOURCE) return; /* it would wait for ever */
        want = SPERLI_E_FINISHED;
    }
    int rc = from ? sperli_recv_from(s, src, tag, nul ? NULL : &st) : sperli_recv(s, src, tag, nul ? NULL : &n);
    WANT(rc, want);
    if (rc == 0 && want == 0) {
        struct kmsg m = take_kept(ci, k);
        TRUE(from ? same_status(st, 0, m.tag, m.m.n) : n == m.m.n);
        set_result(m.m);
        check_result_kept();
    } else {
        TRUE(n == SENT_Z && same_status(st, SENT_I, SENT_I, SENT_Z));
        if (sess) check_result_kept();
    }
    check_last(rc);
}

static void f_finish_send(void) {
    fname = "sperli_finish_send";
    sperli_t s = arg_handle();
    int ci = 0;
    sperli_op op = arg_op(1);
    int i = find_op(op);
    int want = first(want_comm(s, &ci), i < 0 || ops[i].kind != 1 ? SPERLI_E_OPERATION : 0);
    int rc = sperli_finish_send(s, op);
    WANT(rc, want);
    if (rc == 0 && i >= 0) drop_op(i);
    check_last(rc);
}

static void f_start_recv(void) {
    fname = "sperli_start_recv";
    sperli_t s = arg_handle();
    int ci = 0;
    int src = arg_rank(1), tag = arg_tag(1);
    int nul = chance(6);
    sperli_op op = SENT_OP;
    int want = first(want_comm(s, &ci), !rank_ok(src, 1) ? SPERLI_E_RANK
                                        : !tag_ok(tag, 1) ? SPERLI_E_TAG
                                        : nul             ? SPERLI_E_NULL
                                                          : 0);
    if (want == 0 && nops >= MAXOPS) return;
    int rc = sperli_start_recv(s, src, tag, nul ? NULL : &op);
    WANT(rc, want);
    TRUE(rc == 0 ? op != SENT_OP && op > 0 && find_op(op) < 0 : op == SENT_OP);
    if (rc == 0 && want == 0) {
        ops[nops] = (struct op){op, 2, ci, tag, 0, 0, {NULL, 0}};
        long k = find_kept(ci, tag);
        if (k >= 0) {
            struct kmsg m = take_kept(ci, k);
            ops[nops].matched = 1;
            ops[nops].got_tag = m.tag;
            ops[nops].m = m.m;
        } else {
            mc[ci].pend[mc[ci].npend++] = nops;
        }
        nops++;
    }
    check_last(rc);
}

/* f_finish_recv: sperli_finish_recv or sperli_finish_recv_from, with any
 * communicator of the session. */
static void f_finish_recv(void) {
    int from = chance(50);
    fname = from ? "sperli_finish_recv_from" : "sperli_finish_recv";
    sperli_t s = arg_handle();
    int ci = 0;
    sperli_op op = arg_op(2);
    int nul = chance(8);
    size_t n = SENT_Z;
    sperli_status st = SENT_ST;
    int i = find_op(op);
    int want = first(want_comm(s, &ci), i < 0 || ops[i].kind != 2 ? SPERLI_E_OPERATION
                                        : nul                      ? SPERLI_E_NULL
                                                                   : 0);
    if (want == 0 && !ops[i].matched) return; /* it would wait for ever */
    int rc = from ? sperli_finish_recv_from(s, op, nul ? NULL : &st) : sperli_finish_recv(s, op, nul ? NULL : &n);
    WANT(rc, want);
    if (rc == 0 && want == 0) {
        TRUE(from ? same_status(st, 0, ops[i].got_tag, ops[i].m.n) : n == ops[i].m.n);
        set_result(ops[i].m);
        ops[i].m = (struct buf){NULL, 0};
        drop_op(i);
        check_result_kept();
    } else {
        TRUE(n == SENT_Z && same_status(st, SENT_I, SENT_I, SENT_Z));
    }
    check_last(rc);
}

/* f_probe: sperli_probe or sperli_iprobe. Neither takes the message nor
 * touches the result. */
static void f_probe(void) {
    int wait = chance(50);
    fname = wait ? "sperli_probe" : "sperli_iprobe";
    sperli_t s = arg_handle();
    int ci = 0;
    int src = arg_rank(1), tag = arg_tag(1);
    int fnul = !wait && chance(6), snul = chance(6);
    int flag = SENT_I;
    sperli_status st = SENT_ST;
    int want = first(want_comm(s, &ci), !rank_ok(src, 1) ? SPERLI_E_RANK
                                        : !tag_ok(tag, 1) ? SPERLI_E_TAG
                                        : fnul || snul    ? SPERLI_E_NULL
                                                          : 0);
    long k = want == 0 ? find_kept(ci, tag) : -1;
    if (wait && want == 0 && k < 0) {
        if (src == SPERLI_ANY_SOURCE) return; /* it would wait for ever */
        want = SPERLI_E_FINISHED;               /* from itself, nothing sent */
    }
    int rc = wait ? sperli_probe(s, src, tag, snul ? NULL : &st)
                  : sperli_iprobe(s, src, tag, fnul ? NULL : &flag, snul ? NULL : &st);
    WANT(rc, want);
    if (rc == 0 && want == 0 && k >= 0) {
        TRUE(same_status(st, 0, mc[ci].kept[k].tag, mc[ci].kept[k].m.n));
        if (!wait) TRUE(flag == 1);
    } else {
        TRUE(same_status(st, SENT_I, SENT_I, SENT_Z));
        TRUE(flag == (!wait && rc == 0 && want == 0 ? 0 : SENT_I));
    }
    if (sess && chance(20)) check_result_kept();
    check_last(rc);
}

/* f_sendrecv: the receive is posted, then the message sent arrives (to
 * the receive posted first that it fits: another one may take it). A
 * receive from any source left without a message would wait for ever:
 * not made. */
static void f_sendrecv(void) {
    fname = "sperli_sendrecv";
    sperli_t s = arg_handle();
    int ci = 0;
    int dest = arg_rank(0), stag = arg_tag(0);
    const void *data;
    size_t len = arg_len(SPERLI_MAX_MESSAGE, &data);
    if (len > 64 && queued > (8u << 20)) len = 7;
    int src = arg_rank(1), rtag = arg_tag(1);
    int nul = chance(6);
    sperli_status st = SENT_ST;
    int want = first(want_comm(s, &ci), !rank_ok(dest, 0)          ? SPERLI_E_RANK
                                        : !tag_ok(stag, 0)         ? SPERLI_E_TAG
                                        : data == NULL && len > 0  ? SPERLI_E_NULL
                                        : len > SPERLI_MAX_MESSAGE ? SPERLI_E_LENGTH
                                        : !rank_ok(src, 1)         ? SPERLI_E_RANK
                                        : !tag_ok(rtag, 1)         ? SPERLI_E_TAG
                                        : nul                      ? SPERLI_E_NULL
                                                                   : 0);
    /* what the call will get: a kept message, else its own if no receive
     * posted before takes it */
    long k = want == 0 ? find_kept(ci, rtag) : -1;
    int own = 0;
    if (want == 0 && k < 0) {
        own = tag_fits(rtag, stag);
        for (int j = 0; own && j < mc[ci].npend; j++)
            if (tag_fits(ops[mc[ci].pend[j]].tag, stag)) own = 0;
        if (!own) {
            if (src == SPERLI_ANY_SOURCE) return; /* it would wait for ever */
            want = SPERLI_E_FINISHED;               /* the send is made all the same */
        }
    }
    int rc = sperli_sendrecv(s, dest, stag, data, len, src, rtag, nul ? NULL : &st);
    WANT(rc, want);
    if (rc == 0 && want == 0) {
        if (k >= 0) {
            struct kmsg m = take_kept(ci, k);
            arrive(ci, stag, data, len);
            TRUE(same_status(st, 0, m.tag, m.m.n));
            set_result(m.m);
        } else {
            TRUE(same_status(st, 0, stag, len));
            set_result(copy_of(data, len));
        }
        check_result_kept();
    } else {
        if (want == SPERLI_E_FINISHED && rc == want) arrive(ci, stag, data, len);
        TRUE(same_status(st, SENT_I, SENT_I, SENT_Z));
        if (sess) check_result_kept();
    }
    check_last(rc);
}

/* fits: the reduction applies to the type (sperli.h's table). */
static int fits(int type, int red) {
    int isint = type >= SPERLI_INT32 && type <= SPERLI_UINT64;
    int isfloat = type == SPERLI_FLOAT32 || type == SPERLI_FLOAT64;
    if (red <= SPERLI_MAX) return isint || isfloat;
    if (red <= SPERLI_LXOR) return isint;
    return isint || type == SPERLI_BYTES;
}

static size_t elem(int type) {
    static const size_t sz[] = {0, 1, 4, 8, 4, 8, 4, 8};
    return sz[type];
}

/* reduce1 is the reduction of one rank's elements: themselves, save the
 * logical ones, which give 0 or 1. */
static struct buf reduce1(int type, int red, const unsigned char *p, size_t n) {
    struct buf b = copy_of(p, n);
    if (red >= SPERLI_LAND && red <= SPERLI_LXOR) {
        size_t e = elem(type);
        for (size_t k = 0; k < n; k += e) {
            int nz = 0;
            for (size_t j = 0; j < e; j++) nz |= b.p[k + j];
            memset(b.p + k, 0, e);
            b.p[k] = nz != 0; /* little-endian 1 */
        }
    }
    return b;
}

/* collected checks a collective that makes data: its code, and its
 * result (out) or the earlier one. */
static void collected(int rc, int want, size_t n, struct buf out) {
    WANT(rc, want);
    if (want < 0) {
        TRUE(n == SENT_Z);
        free(out.p);
    } else {
        TRUE(n == out.n);
        set_result(out);
    }
    if (sess && (want >= 0 || chance(20))) check_result_kept();
    check_last(rc);
}

static void f_collective(void) {
    sperli_t s = arg_handle();
    int ci = 0;
    int which = (int)below(9);
    int root = chance(85) ? 0 : arg_rank(0);
    int type = chance(85) ? 1 + (int)below(7) : (chance(50) ? 0 : (int)next64());
    int red = chance(85) ? 1 + (int)below(10) : (chance(50) ? 11 : (int)next64());
    const void *data;
    size_t len = arg_len(SPERLI_MAX_COLLECTIVE, &data);
    int nul = chance(6);
    size_t n = SENT_Z;
    int w = want_comm(s, &ci);
    int want = 0;
    struct buf out = {NULL, 0};
    const unsigned char *d = data;
    switch (which) {
    case 0:
        fname = "sperli_barrier";
        int rc = sperli_barrier(s);
        WANT(rc, w);
        check_last(rc);
        return;
    case 1:
    case 5: {
        fname = which == 1 ? "sperli_bcast" : "sperli_scatter";
        /* data is ignored off the root */
        int onroot = root == 0;
        want = first(w, onroot && data == NULL && len > 0 ? SPERLI_E_NULL : nul ? SPERLI_E_NULL : 0);
        if (want == 0) {
            if (!onroot || len > SPERLI_MAX_COLLECTIVE)
                want = SPERLI_H1618;
            else
                out = copy_of(d, len);
        }
        int rc = which == 1 ? sperli_bcast(s, root, data, len, nul ? NULL : &n)
                            : sperli_scatter(s, root, data, len, nul ? NULL : &n);
        collected(rc, want, n, out);
        return;
    }
    case 2:
    case 3:
    case 8: {
        fname = which == 2 ? "sperli_reduce" : which == 3 ? "sperli_allreduce" : "sperli_reduce_scatter";
        if (which != 2) root = 0;
        want = first(w, type < 1 || type > 7             ? SPERLI_E_TYPE
                        : red < 1 || red > 10            ? SPERLI_E_OP
                        : data == NULL && len > 0        ? SPERLI_E_NULL
                        : nul                            ? SPERLI_E_NULL
                                                         : 0);
        /* one rank: reduce_scatter's one block is all the data */
        if (want == 0) {
            if (root != 0 || !fits(type, red) || len % elem(type) != 0 || len > SPERLI_MAX_COLLECTIVE)
                want = SPERLI_H1618;
            else
                out = reduce1(type, red, d, len);
        }
        size_t *np = nul ? NULL : &n;
        int rc = which == 2   ? sperli_reduce(s, root, type, red, data, len, np)
                 : which == 3 ? sperli_allreduce(s, type, red, data, len, np)
                              : sperli_reduce_scatter(s, type, red, data, len, np);
        collected(rc, want, n, out);
        return;
    }
    default: {
        /* gather, allgather, alltoall: one rank's data is the result (one
         * block, for alltoall) */
        fname = which == 4 ? "sperli_gather" : which == 6 ? "sperli_allgather" : "sperli_alltoall";
        if (which != 4) root = 0;
        want = first(w, data == NULL && len > 0 ? SPERLI_E_NULL : nul ? SPERLI_E_NULL : 0);
        if (want == 0) {
            if (root != 0 || len > SPERLI_MAX_COLLECTIVE)
                want = SPERLI_H1618;
            else
                out = copy_of(d, len);
        }
        size_t *np = nul ? NULL : &n;
        int rc = which == 4   ? sperli_gather(s, root, data, len, np)
                 : which == 6 ? sperli_allgather(s, data, len, np)
                              : sperli_alltoall(s, data, len, np);
        collected(rc, want, n, out);
        return;
    }
    }
}

/* f_split: new communicators of one rank, or none (SPERLI_UNDEFINED), or
 * H1618 for a color below -1; split makes no data. */
static void f_split(void) {
    fname = "sperli_split";
    sperli_t s = arg_handle();
    int ci = 0;
    static const int colors[] = {0, 1, 5, INT_MAX, SPERLI_UNDEFINED, SPERLI_UNDEFINED, -2, INT_MIN};
    int color = chance(90) ? colors[below(8)] : (int)next64();
    int key = chance(50) ? 0 : (int)next64();
    int nul = chance(6);
    sperli_t nc = SENT_I;
    int want = first(want_comm(s, &ci), nul ? SPERLI_E_NULL : color < -1 ? SPERLI_H1618 : 0);
    if (want == 0 && color >= 0 && nmc >= MAXCOMMS) return; /* the model's table is full */
    int rc = sperli_split(s, color, key, nul ? NULL : &nc);
    WANT(rc, want);
    if (rc == 0 && want == 0) {
        if (color < 0) {
            TRUE(nc == SPERLI_NONE);
        } else {
            TRUE(new_handle(nc));
            memset(&mc[nmc], 0, sizeof mc[nmc]);
            mc[nmc++].h = nc;
        }
    } else {
        TRUE(nc == SENT_I);
    }
    if (sess && chance(20)) check_result_kept();
    check_last(rc);
}

static void f_comm_free(void) {
    fname = "sperli_comm_free";
    sperli_t s = arg_handle();
    int ci = 0;
    int want = want_comm(s, &ci);
    if (want == 0 && ci == 0) want = SPERLI_E_COMM; /* the session */
    int rc = sperli_comm_free(s);
    WANT(rc, want);
    if (rc == 0 && want == 0) mc[ci].freed = 1;
    check_last(rc);
}

/* f_losses: the calls of SPEC §10.3/§10.4 in the job of one rank, where no
 * rank is ever lost: set_on_loss, failed, agree, shrink and grow (the world
 * kept), generation, slot, layout; and revoke of a communicator made by
 * split with nothing of the model on it, followed by its calls (1626 but
 * agree) and its free (1626, freed). */
static void f_losses(void) {
    sperli_t s = arg_handle();
    int ci = 0;
    int w = want_comm(s, &ci);
    int nul = chance(8);
    int rc;
    int ints[4] = {SENT_I, SENT_I, SENT_I, SENT_I};
    size_t n = SENT_Z;
    switch (below(7)) {
    case 0: {
        fname = "sperli_set_on_loss";
        static const int modes[] = {SPERLI_LOSS_RECOVER, SPERLI_LOSS_RETURN, 2, -1, INT_MIN, INT_MAX};
        int mode = chance(90) ? modes[below(6)] : (int)next64();
        int ok = mode == SPERLI_LOSS_RECOVER || mode == SPERLI_LOSS_RETURN;
        WANT(rc = sperli_set_on_loss(s, mode), first(w, ok ? 0 : SPERLI_E_MODE));
        if (rc == 0) loss_return = mode == SPERLI_LOSS_RETURN;
        break;
    }
    case 1: {
        fname = "sperli_failed";
        int nulbuf = chance(10);
        size_t cap = chance(50) ? 4 : chance(50) ? 0 : SIZE_MAX;
        int want = first(w, nul ? SPERLI_E_NULL : nulbuf && cap > 0 ? SPERLI_E_NULL : 0);
        WANT(rc = sperli_failed(s, nulbuf ? NULL : ints, cap, nul ? NULL : &n), want);
        TRUE(want == 0 ? n == 0 : n == SENT_Z);
        TRUE(ints[0] == SENT_I);
        break;
    }
    case 2: {
        fname = "sperli_agree";
        uint64_t flag = next64(), in = flag;
        WANT(rc = sperli_agree(s, nul ? NULL : &flag), first(w, nul ? SPERLI_E_NULL : 0));
        TRUE(flag == in); /* the AND of one rank's flag, or untouched */
        break;
    }
    case 3: {
        int grow = chance(50);
        fname = grow ? "sperli_grow" : "sperli_shrink";
        sperli_t nc = SENT_I;
        int want = first(want_session(s), nul ? SPERLI_E_NULL : !loss_return ? SPERLI_E_MODE : 0);
        rc = grow ? sperli_grow(s, nul ? NULL : &nc) : sperli_shrink(s, nul ? NULL : &nc);
        WANT(rc, want);
        TRUE(want == 0 ? nc == sess : nc == SENT_I);
        break;
    }
    case 4: {
        int slot = chance(50);
        fname = slot ? "sperli_slot" : "sperli_generation";
        uint32_t u = SENT_I;
        int i = SENT_I;
        rc = slot ? sperli_slot(s, nul ? NULL : &i) : sperli_generation(s, nul ? NULL : &u);
        WANT(rc, first(w, nul ? SPERLI_E_NULL : 0));
        TRUE(rc != 0 ? i == SENT_I && u == (uint32_t)SENT_I : slot ? i == 0 : u == 0);
        break;
    }
    case 5: {
        fname = "sperli_layout";
        int nulbuf = chance(10);
        size_t cap = chance(50) ? 4 : chance(50) ? 0 : SIZE_MAX;
        int want = first(w, nul ? SPERLI_E_NULL : nulbuf && cap > 0 ? SPERLI_E_NULL : cap < 1 ? SPERLI_E_LENGTH : 0);
        WANT(rc = sperli_layout(s, nulbuf ? NULL : ints, cap, nul ? NULL : &n), want);
        TRUE(want == 0 || want == SPERLI_E_LENGTH ? n == 1 : n == SENT_Z);
        TRUE(want == 0 ? ints[0] == 0 && ints[1] == SENT_I : ints[0] == SENT_I);
        break;
    }
    default: {
        fname = "sperli_revoke";
        if (w != 0) {
            WANT(rc = sperli_revoke(s), w);
            break;
        }
        /* only a communicator made by split, with no operation or message
         * of the model on it (revoke would end them) */
        if (ci == 0 || mc[ci].npend > 0 || mc[ci].nkept > 0) return;
        for (int k = 0; k < nops; k++)
            if (ops[k].comm == ci) return;
        WANT(rc = sperli_revoke(s), 0);
        WANT(sperli_revoke(s), 0);
        fname = "sperli_barrier";
        WANT(rc = sperli_barrier(s), SPERLI_H1626);
        check_last(rc);
        fname = "sperli_agree";
        uint64_t flag = 5;
        WANT(sperli_agree(s, &flag), 0);
        TRUE(flag == 5);
        fname = "sperli_comm_free";
        WANT(rc = sperli_comm_free(s), SPERLI_H1626);
        mc[ci].freed = 1;
        nrevoked++;
        break;
    }
    }
    check_last(rc);
}

static void f_result(void) {
    fname = "sperli_result";
    sperli_t s = arg_handle();
    int ci = 0;
    unsigned char *b = malloc(res.n + 65);
    size_t cap;
    switch (below(5)) {
    case 0: cap = res.n; break;
    case 1: cap = res.n ? res.n - 1 : 0; break;
    case 2: cap = SIZE_MAX; break;
    case 3: cap = 0; break;
    default: cap = res.n + below(64); break;
    }
    int bnul = chance(10), lnul = chance(6);
    size_t n = SENT_Z;
    /* a capacity is only a promise of room: never more than b holds unless
     * the result fits anyway (only the result is written) */
    int want = first(want_comm(s, &ci),
                     lnul ? SPERLI_E_NULL : bnul && cap > 0 ? SPERLI_E_NULL : cap < res.n ? SPERLI_E_LENGTH : 0);
    memset(b, 'Z', res.n + 1);
    int rc = sperli_result(s, bnul ? NULL : b, cap, lnul ? NULL : &n);
    WANT(rc, want);
    if (want == 0) TRUE(n == res.n && (res.n == 0 || memcmp(b, res.p, res.n) == 0) && b[res.n] == 'Z');
    if (want == SPERLI_E_LENGTH) TRUE(n == res.n && b[0] == 'Z');
    if (want != 0 && want != SPERLI_E_LENGTH) TRUE(n == SENT_Z);
    free(b);
    check_last(rc);
}

static void f_silence(void) {
    sperli_t s = arg_handle();
    int ci = 0;
    int w = want_comm(s, &ci);
    if (chance(30)) {
        fname = "sperli_heartbeat";
        int rc = sperli_heartbeat(s);
        WANT(rc, w);
        check_last(rc);
        return;
    }
    fname = "sperli_set_silence";
    static const int ms[] = {SPERLI_MIN_SILENCE_MS, SPERLI_MAX_SILENCE_MS, 5000, 99, 0, -1, INT_MIN, INT_MAX,
                             SPERLI_MAX_SILENCE_MS + 1};
    int v = chance(80) ? ms[below(9)] : (int)next64();
    if (v >= SPERLI_MIN_SILENCE_MS && v <= SPERLI_MAX_SILENCE_MS && v < 1000) v = 1000;
    int rc = sperli_set_silence(s, v);
    WANT(rc, first(w, v < SPERLI_MIN_SILENCE_MS || v > SPERLI_MAX_SILENCE_MS ? SPERLI_E_COUNT : 0));
    check_last(rc);
}

static void f_checkpoints(void) {
    sperli_t s = arg_handle();
    int w = want_session(s); /* checkpoints are the job's: the session only */
    static char longpath[SPERLI_MAX_PATH + 2];
    if (longpath[0] == 0) memset(longpath, 'a', SPERLI_MAX_PATH + 1);
    switch (below(3)) {
    case 0: {
        fname = "sperli_use_checkpoints";
        const char *dir = chance(70) ? ckpt_dir : chance(30) ? NULL : chance(50) ? longpath : "";
        int want = first(w, dir == NULL ? SPERLI_E_NULL : dir == longpath ? SPERLI_E_PATH : 0);
        if (want == 0 && dir[0] == 0) want = SPERLI_H1625; /* the job has no --checkpoint-dir */
        int rc = sperli_use_checkpoints(s, dir);
        WANT(rc, want);
        if (rc == 0 && want == 0) ckpt_used = 1;
        check_last(rc);
        return;
    }
    case 1: {
        fname = "sperli_checkpoint";
        const void *data;
        size_t len = arg_len(SPERLI_MAX_CHECKPOINT, &data);
        if (len > 4096 && len <= SPERLI_MAX_CHECKPOINT) len %= 4096;
        int want = first(w, data == NULL && len > 0 ? SPERLI_E_NULL : len > SPERLI_MAX_CHECKPOINT ? SPERLI_E_LENGTH : 0);
        if (want == 0) want = !ckpt_used ? SPERLI_H1625 : nops > 0 ? SPERLI_H1624 : 0;
        int rc = sperli_checkpoint(s, data, len);
        WANT(rc, want);
        if (rc == 0 && want == 0) {
            uint64_t e = ++sess_epoch;
            int k = 0;
            for (int j = 0; j < nepochs; j++) {
                if (epochs[j].e == e || epochs[j].e + 1 < e)
                    free(epochs[j].state.p); /* replaced, or pruned */
                else
                    epochs[k++] = epochs[j];
            }
            nepochs = k;
            if (nepochs < MAXEPOCHS) {
                epochs[nepochs].e = e;
                epochs[nepochs++].state = copy_of(data, len);
            } else {
                TRUE(!"more epochs in the directory than the model holds");
            }
        }
        check_last(rc);
        return;
    }
    default: {
        fname = "sperli_resume";
        int rnul = chance(8), lnul = chance(8);
        int r = SENT_I;
        size_t n = SENT_Z;
        int want = first(w, rnul || lnul ? SPERLI_E_NULL : 0);
        if (want == 0 && nops > 0) return; /* not modelled: resume with operations open */
        if (want == 0 && !ckpt_used) want = SPERLI_H1625;
        int rc = sperli_resume(s, rnul ? NULL : &r, lnul ? NULL : &n);
        WANT(rc, want);
        int newest = -1;
        for (int j = 0; j < nepochs; j++)
            if (newest < 0 || epochs[j].e > epochs[newest].e) newest = j;
        if (want == 0) {
            TRUE(r == (newest >= 0) && n == (newest >= 0 ? epochs[newest].state.n : 0));
            set_result(newest >= 0 ? copy_of(epochs[newest].state.p, epochs[newest].state.n) : (struct buf){NULL, 0});
            if (newest >= 0) sess_epoch = epochs[newest].e;
            check_result_kept();
        } else if (want > 0) {
            TRUE(n == 0 && r == 0);
            set_result((struct buf){NULL, 0});
        } else {
            TRUE(r == SENT_I && n == SENT_Z);
        }
        check_last(rc);
        return;
    }
    }
}

static void f_last_error(void) {
    fname = "sperli_last_error";
    static char b[4096];
    size_t cap;
    switch (below(5)) {
    case 0: cap = SIZE_MAX; break;
    case 1: cap = (size_t)1 << 63; break;
    case 2: cap = below(8); break;
    default: cap = sizeof b; break;
    }
    int bnul = chance(8), lnul = chance(6);
    size_t n = SENT_Z, need = 0;
    char probe[1];
    WANT(sperli_last_error(probe, 0, &need) == SPERLI_E_LENGTH || need == 0, 1);
    if (need + 1 > sizeof b && cap > sizeof b) cap = sizeof b; /* never more room than b has */
    int want = lnul ? SPERLI_E_NULL : bnul && cap > 0 ? SPERLI_E_NULL : cap < need + 1 ? SPERLI_E_LENGTH : 0;
    memset(b, 'Z', sizeof b);
    WANT(sperli_last_error(bnul ? NULL : b, cap, lnul ? NULL : &n), want);
    if (want == 0) TRUE(n == need && strlen(b) == need && (need + 1 >= sizeof b || b[need + 1] == 'Z'));
    if (want == SPERLI_E_LENGTH) TRUE(n == need && (cap == 0 || b[0] == 'Z'));
}

static void f_init(void) {
    sperli_t s = SENT_I;
    int k = (int)below(10);
    const char *line = one_line;
    static char *bad[6];
    if (bad[0] == NULL) {
        bad[0] = "";
        bad[1] = "{}";
        bad[2] = "not json\n";
        bad[3] = malloc((size_t)SPERLI_MAX_JOB_LINE + 2);
        memset(bad[3], ' ', (size_t)SPERLI_MAX_JOB_LINE + 1);
        bad[3][SPERLI_MAX_JOB_LINE + 1] = 0;
        bad[4] = malloc(strlen(one_line) + 32);
        sprintf(bad[4], "{\"listen_fd\":%d,%s", 1 + (int)below(2), one_line + 1);
        bad[5] = malloc(strlen(one_line) + 32);
        sprintf(bad[5], "{\"x\":1,%s", one_line + 1);
    }
    int want;
    int rc;
    if (k == 0) {
        fname = "sperli_init_stdin";
        int nul = chance(20);
        want = nul ? SPERLI_E_NULL : sess ? SPERLI_E_SESSION : SPERLI_H1615; /* stdin is empty */
        rc = sperli_init_stdin(nul ? NULL : &s);
        WANT(rc, want);
        if (want > 0) aborted = 0;
    } else {
        fname = "sperli_init";
        int lnul = chance(5), snul = chance(5);
        if (k <= 3) line = bad[below(6)];
        want = lnul || snul ? SPERLI_E_NULL
               : line == bad[3] ? SPERLI_E_LENGTH
               : sess           ? SPERLI_E_SESSION
               : line == one_line ? 0
                                  : SPERLI_H1615;
        rc = sperli_init(lnul ? NULL : line, snul ? NULL : &s);
        WANT(rc, want);
        if (want >= 0) aborted = 0;
        if (rc == 0 && want == 0) {
            TRUE(s != SENT_I && new_handle(s));
            sess = s;
            memset(&mc[0], 0, sizeof mc[0]);
            mc[0].h = s;
            nmc = 1;
            return;
        }
    }
    TRUE(s == SENT_I);
    check_last(rc);
}

static void f_end(void) {
    sperli_t s = arg_handle();
    int w = want_session(s);
    int k = (int)below(10);
    if (k < 4) {
        fname = "sperli_finish";
        int want = first(w, nops > 0 ? SPERLI_E_OPEN : 0);
        int rc = sperli_finish(s);
        WANT(rc, want);
        if (rc == 0 && want == 0) {
            session_ended();
            aborted = 0;
        }
        check_last(rc);
    } else if (k < 6) {
        fname = "sperli_abort";
        int rc = sperli_abort(s);
        WANT(rc, w);
        if (rc == 0 && w == 0) {
            session_ended();
            aborted = 1;
        }
        check_last(rc);
    } else {
        fname = "sperli_exit";
        if (chance(50) && sess == 0) s = SPERLI_NONE;
        int snul = chance(8);
        static const int codesx[] = {0, 0, 0, 1, 1611, 1612, SPERLI_E_RANK, 42};
        int code = codesx[below(8)];
        int st = SENT_I;
        int hw = (s == SPERLI_NONE && sess == 0) ? 0 : want_session(s);
        int want = first(hw, snul ? SPERLI_E_NULL : 0);
        int wst = code == 0 ? (sess ? (nops > 0) : aborted) : code == 1611 ? 75 : 1;
        int rc = sperli_exit(s, code, snul ? NULL : &st);
        WANT(rc, want);
        if (want == 0) {
            TRUE(st == wst);
            if (sess) session_ended();
        } else {
            TRUE(st == SENT_I);
            check_last(rc);
        }
    }
}

/* f_fork: in the child every function answers SPERLI_E_FORK. */
static void f_fork(void) {
    fname = "fork";
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) {
        int bad = 0, i;
        size_t n;
        char b[64];
        sperli_t s2;
        sperli_op op;
        sperli_status st;
        sperli_t sub = nmc > 1 ? mc[nmc - 1].h : sess;
        bad += sperli_rank(sub, &i) != SPERLI_E_FORK;
        bad += sperli_recv_from(sub, SPERLI_ANY_SOURCE, 1, &st) != SPERLI_E_FORK;
        bad += sperli_iprobe(sub, 0, 1, &i, &st) != SPERLI_E_FORK;
        bad += sperli_sendrecv(sess, 0, 1, "x", 1, 0, 1, &st) != SPERLI_E_FORK;
        bad += sperli_alltoall(sub, "x", 1, &n) != SPERLI_E_FORK;
        bad += sperli_split(sess, 0, 0, &s2) != SPERLI_E_FORK;
        bad += sperli_comm_free(sub) != SPERLI_E_FORK;
        bad += sperli_rank(sess, &i) != SPERLI_E_FORK;
        bad += sperli_send(sess, 0, 1, "x", 1) != SPERLI_E_FORK;
        bad += sperli_start_recv(sess, 0, 1, &op) != SPERLI_E_FORK;
        bad += sperli_barrier(sess) != SPERLI_E_FORK;
        bad += sperli_result(sess, b, sizeof b, &n) != SPERLI_E_FORK;
        bad += sperli_last_error(b, sizeof b, &n) != SPERLI_E_FORK;
        bad += sperli_init(one_line, &s2) != SPERLI_E_FORK;
        bad += sperli_finish(sess) != SPERLI_E_FORK;
        bad += sperli_exit(sess, 0, &i) != SPERLI_E_FORK;
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    for (int k = 0; k < 3000; k++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (k == 2999) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static char *read_line(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, f) < 0) {
        fprintf(stderr, "%s: no line\n", path);
        exit(2);
    }
    fclose(f);
    return line;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fuzz_sperli SEED SECONDS ONE.job CKPTDIR < /dev/null\n");
        return 2;
    }
    seed = strtoull(argv[1], NULL, 10);
    double secs = atof(argv[2]);
    one_line = read_line(argv[3]);
    ckpt_dir = argv[4];
    if (getenv("FUZZ_TRACE")) trace_from = atol(getenv("FUZZ_TRACE"));
    const char *j = strstr(one_line, "\"job\":\"");
    if (j == NULL) {
        fprintf(stderr, "%s: no job id\n", argv[3]);
        return 2;
    }
    memcpy(job_id, j + 7, SPERLI_JOB_ID_LEN);
    rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t k = 0; k < POOL; k++) pool[k] = (unsigned char)next64();
    big = malloc(SPERLI_MAX_MESSAGE + 64);
    memset(big, 7, SPERLI_MAX_MESSAGE + 64);
    rng = seed * 0x9E3779B97F4A7C15ULL + 1;

    double start = now(), end = start + secs;
    uint64_t fns[20] = {0};
    while (1) {
        if ((ncall & 63) == 0 && now() >= end) break;
        ncall++;
        if (trace_from >= 0 && (long)ncall >= trace_from) {
            printf("call %llu: sess %d, %d ops, result %zu bytes\n", (unsigned long long)ncall, sess, nops,
                   res.n);
            fflush(stdout);
        }
        uint32_t f = below(1000);
        if (sess == 0 && f < 735) f = 960 + below(20); /* mostly init when there is no session */
        int k;
        if (f < 70) k = 0, f_info();
        else if (f < 200) k = 1, f_send((int)below(3) == 0);
        else if (f < 310) k = 2, f_recv();
        else if (f < 360) k = 3, f_start_recv();
        else if (f < 420) k = 4, f_finish_recv();
        else if (f < 460) k = 5, f_finish_send();
        else if (f < 500) k = 15, f_probe();
        else if (f < 550) k = 16, f_sendrecv();
        else if (f < 680) k = 6, f_collective();
        else if (f < 705) k = 17, f_split();
        else if (f < 715) k = 18, f_comm_free();
        else if (f < 735) k = 19, f_losses();
        else if (f < 775) k = 7, f_result();
        else if (f < 820) k = 8, f_silence();
        else if (f < 835) k = 9, f_checkpoints();
        else if (f < 900) k = 10, f_last_error();
        else if (f < 960) k = 11, f_end();
        else if (f < 999) k = 12, f_init();
        else if (below(20) == 0) k = 13, f_fork();
        else k = 14, f_info();
        fns[k]++;
    }
    printf("fuzz_sperli: %s (seed %llu, %llu calls, %llu checks, %d mismatches, %.1f s; calls by kind:",
           mismatches ? "FAILED" : "ok", (unsigned long long)seed, (unsigned long long)ncall,
           (unsigned long long)nchecks, mismatches, now() - start);
    for (int k = 0; k < 20; k++) printf(" %llu", (unsigned long long)fns[k]);
    printf("; %llu communicators revoked)\n", (unsigned long long)nrevoked);
    return mismatches ? 1 : 0;
}
