/*
 * test_ranks — a job of three C ranks in three processes, run by
 * scripts/libsperli/check-ranks.sh as
 *
 *   sperli run -n 3 test_ranks
 *
 * Every rank: a barrier, allreduces (int64 sum, float64 max, uint32 bxor),
 * wrong collective calls that are H1618 on every rank while the job goes
 * on, a negative code on one rank that changes nothing for the others, a
 * ring of open operations, bcast, reduce, gather and scatter with their
 * results checked; the calls of issue 13 against references computed
 * here: receives from any source and tag while two ranks send at once
 * (each source's order kept), probe then receive, sendrecv ring shifts of
 * 4 MiB, allgather, alltoall and reduce_scatter (int64, and float64 folded
 * in rank order) on both sides of the schedule switch, splits of several
 * colors at once (sub-ranks as MPI_Comm_split gives them, the same tag on
 * the job and a communicator kept apart, a nested split, comm_free); on
 * rank 1 a thread waits in sperli_recv while the main
 * thread's calls are answered SPERLI_E_BUSY; then rank 2 finishes first
 * and ranks 0 and 1 see SPERLI_E_FINISHED for it, which leaves their kept
 * result and out arguments untouched. Each rank prints
 * "test_ranks: rank R ok" at the end, or its failed checks on standard
 * error (and ends with exit status 1).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sperli.h"

static int rank = -1, size, failures;
static sperli_t s;

#define EXPECT(call, want)                                                                   \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        int want_ = (want);                                                                  \
        if (rc_ != want_) {                                                                  \
            failures++;                                                                      \
            fprintf(stderr, "test_ranks.c:%d: rank %d: %s = %d (%s), want %d (%s)\n",        \
                    __LINE__, rank, #call, rc_, sperli_strerror(rc_), want_,                \
                    sperli_strerror(want_));                                                 \
        }                                                                                    \
    } while (0)

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            failures++;                                                                      \
            fprintf(stderr, "test_ranks.c:%d: rank %d: %s does not hold\n", __LINE__, rank,  \
                    #cond);                                                                  \
        }                                                                                    \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* result copies the session's result into buf and returns its length. */
static size_t result(void *buf, size_t cap) {
    size_t n = 0;
    EXPECT(sperli_result(s, buf, cap, &n), 0);
    return n;
}

struct waiter {
    int rc;
    size_t n;
    volatile int done;
};

/* wait_recv waits in sperli_recv; while the main thread's probe holds the
 * library it is itself answered SPERLI_E_BUSY, and tries again. */
static void *wait_recv(void *arg) {
    struct waiter *w = arg;
    while ((w->rc = sperli_recv(s, 0, 7, &w->n)) == SPERLI_E_BUSY) sleep_ms(1);
    w->done = 1;
    return NULL;
}

static void collectives(void) {
    size_t n;
    /* allreduce: int64 sum of rank+1 */
    int64_t mine = rank + 1, total = 0;
    EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, &mine, sizeof mine, &n), 0);
    CHECK(n == 8 && result(&total, sizeof total) == 8 && total == 6);
    /* float64 max with a NaN nowhere, then min */
    double d[2] = {rank * 1.5, -rank * 2.0}, e[2];
    EXPECT(sperli_allreduce(s, SPERLI_FLOAT64, SPERLI_MAX, d, sizeof d, &n), 0);
    CHECK(result(e, sizeof e) == 16 && e[0] == 3.0 && e[1] == 0.0);
    EXPECT(sperli_allreduce(s, SPERLI_FLOAT64, SPERLI_MIN, d, sizeof d, &n), 0);
    CHECK(result(e, sizeof e) == 16 && e[0] == 0.0 && e[1] == -4.0);
    uint32_t x = 1u << rank, y = 0;
    EXPECT(sperli_allreduce(s, SPERLI_UINT32, SPERLI_BXOR, &x, sizeof x, &n), 0);
    CHECK(result(&y, sizeof y) == 4 && y == 7);

    /* wrong calls: H1618 on every rank, the job goes on */
    EXPECT(sperli_bcast(s, 7, NULL, 0, &n), SPERLI_H1618);
    int64_t two[2] = {1, 2};
    /* only rank 1 gives 7 bytes of int64: still H1618 everywhere */
    EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, two, rank == 1 ? 7 : 8, &n), SPERLI_H1618);
    /* only rank 2 asks for a reduction that does not fit */
    EXPECT(sperli_reduce(s, 0, SPERLI_FLOAT64, rank == 2 ? SPERLI_BAND : SPERLI_SUM, d, 8, &n),
           SPERLI_H1618);
    EXPECT(sperli_barrier(s), 0);

    /* a negative code on rank 2 only: nothing happens, the others wait in
     * the call until rank 2 makes it right */
    if (rank == 2) {
        EXPECT(sperli_allreduce(s, 99, SPERLI_SUM, &mine, sizeof mine, &n), SPERLI_E_TYPE);
        EXPECT(sperli_allreduce(s, SPERLI_INT64, 0, &mine, sizeof mine, &n), SPERLI_E_OP);
        EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, NULL, sizeof mine, &n), SPERLI_E_NULL);
        sleep_ms(200);
    }
    EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_PROD, &mine, sizeof mine, &n), 0);
    CHECK(result(&total, sizeof total) == 8 && total == 6);

    /* bcast from rank 1; off the root the data is ignored (NULL is fine) */
    char b[16] = {0};
    EXPECT(sperli_bcast(s, 1, rank == 1 ? "from-one" : NULL, rank == 1 ? 8 : 99, &n), 0);
    CHECK(n == 8 && result(b, sizeof b) == 8 && memcmp(b, "from-one", 8) == 0);
    /* reduce to rank 2 */
    int32_t r3[3] = {rank, 10 * rank, -rank}, q[3] = {0};
    EXPECT(sperli_reduce(s, 2, SPERLI_INT32, SPERLI_SUM, r3, sizeof r3, &n), 0);
    if (rank == 2)
        CHECK(n == 12 && result(q, sizeof q) == 12 && q[0] == 3 && q[1] == 30 && q[2] == -3);
    else
        CHECK(n == 0);
    /* gather to rank 0 */
    char g[2] = {(char)('a' + rank), (char)('A' + rank)}, gg[8] = {0};
    EXPECT(sperli_gather(s, 0, g, 2, &n), 0);
    if (rank == 0)
        CHECK(n == 6 && result(gg, sizeof gg) == 6 && memcmp(gg, "aAbBcC", 6) == 0);
    else
        CHECK(n == 0);
    /* scatter from rank 2 */
    char sc[4] = {0};
    EXPECT(sperli_scatter(s, 2, rank == 2 ? "xxyyzz" : NULL, rank == 2 ? 6 : 0, &n), 0);
    CHECK(n == 2 && result(sc, sizeof sc) == 2 && sc[0] == "xyz"[rank] && sc[1] == "xyz"[rank]);
}

/* ------------------------------------------------------------------------
 * The calls of issue 13, each against a reference computed here.
 */

/* pat is byte k of block j of rank r's data: every rank can compute every
 * other rank's. */
static unsigned char pat(int r, int j, size_t k) { return (unsigned char)(r * 53 + j * 17 + k * 7 + 1); }

static int is_status(sperli_status st, int src, int tag, size_t len) {
    return st.source == src && st.tag == tag && st.len == len;
}

/* wildcards: ranks 1 and 2 send to rank 0 at once; rank 0 receives from
 * any source and any tag and sees each source's messages in the order
 * sent; then probes before it receives. */
static void wildcards(void) {
    enum { K = 300 };
    sperli_status st;
    size_t n;
    if (rank == 0) {
        sperli_op op;
        /* posted before anything is sent: it takes rank 2's tag 50 */
        EXPECT(sperli_start_recv(s, SPERLI_ANY_SOURCE, 50, &op), 0);
        int next[3] = {0, 0, 0}, bad = 0;
        for (int m = 0; m < 2 * K; m++) {
            int32_t got[2] = {-1, -1};
            st = (sperli_status){-9, -9, 0};
            EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
            if (st.source < 1 || st.source > 2 || st.len != sizeof got) {
                bad++;
                continue;
            }
            result(got, sizeof got);
            /* the message says who sent it and its number from that source */
            if (got[0] != st.source || got[1] != next[st.source] || st.tag != 30 + got[1] % 3) bad++;
            next[st.source] = got[1] + 1;
        }
        CHECK(bad == 0 && next[1] == K && next[2] == K);
        st = (sperli_status){-9, -9, 0};
        EXPECT(sperli_finish_recv_from(s, op, &st), 0);
        CHECK(is_status(st, 2, 50, 5));
        char b[8];
        CHECK(result(b, sizeof b) == 5 && memcmp(b, "fifty", 5) == 0);
    } else {
        for (int32_t m = 0; m < K; m++) {
            int32_t msg[2] = {rank, m};
            EXPECT(sperli_send(s, 0, 30 + m % 3, msg, sizeof msg), 0);
        }
        if (rank == 2) EXPECT(sperli_send(s, 0, 50, "fifty", 5), 0);
    }
    EXPECT(sperli_barrier(s), 0);

    /* probe, then receive what it told */
    enum { L = 100000 };
    if (rank == 0) {
        EXPECT(sperli_probe(s, SPERLI_ANY_SOURCE, 40, &st), 0);
        CHECK(is_status(st, 1, 40, L));
        int flag = -1;
        sperli_status st2 = {-9, -9, 0};
        EXPECT(sperli_iprobe(s, 1, SPERLI_ANY_TAG, &flag, &st2), 0);
        CHECK(flag == 1 && is_status(st2, 1, 40, L));
        EXPECT(sperli_probe(s, 2, SPERLI_ANY_TAG, &st2), 0);
        CHECK(is_status(st2, 2, 41, 3));
        unsigned char *b = malloc(L);
        EXPECT(sperli_recv(s, st.source, st.tag, &n), 0);
        CHECK(n == L && result(b, L) == L);
        int same = 1;
        for (size_t k = 0; k < L; k++) same &= b[k] == pat(1, 40, k);
        CHECK(same);
        free(b);
        EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
        CHECK(is_status(st, 2, 41, 3));
        flag = -1;
        EXPECT(sperli_iprobe(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &flag, &st2), 0);
        CHECK(flag == 0); /* nothing else was sent to rank 0 */
    } else if (rank == 1) {
        unsigned char *b = malloc(L);
        for (size_t k = 0; k < L; k++) b[k] = pat(1, 40, k);
        EXPECT(sperli_send(s, 0, 40, b, L), 0);
        free(b);
    } else {
        EXPECT(sperli_send(s, 0, 41, "abc", 3), 0);
    }
    /* wildcards are no ranks or tags to send to */
    EXPECT(sperli_send(s, SPERLI_ANY_SOURCE, 1, "x", 1), SPERLI_E_RANK);
    EXPECT(sperli_send(s, 0, SPERLI_ANY_TAG, "x", 1), SPERLI_E_TAG);
    EXPECT(sperli_recv(s, -2, 1, &n), SPERLI_E_RANK);
    EXPECT(sperli_barrier(s), 0);
}

/* sendrecv: a ring shift of messages larger than the sockets' buffers
 * (every rank sends right and receives from the left), then pairs. */
static void shifts(void) {
    enum { M = 4 << 20 };
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    unsigned char *out = malloc(M), *in = malloc(M);
    for (size_t k = 0; k < M; k++) out[k] = pat(rank, 70, k);
    sperli_status st = {-9, -9, 0};
    EXPECT(sperli_sendrecv(s, right, 70, out, M, left, 70, &st), 0);
    CHECK(is_status(st, left, 70, M) && result(in, M) == M);
    int same = 1;
    for (size_t k = 0; k < M; k++) same &= in[k] == pat(left, 70, k);
    CHECK(same);
    /* with wildcards, the other way round */
    int32_t me = rank, got = -1;
    EXPECT(sperli_sendrecv(s, left, 71 + rank, &me, sizeof me, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, right, 71 + right, 4) && result(&got, sizeof got) == 4 && got == right);
    EXPECT(sperli_barrier(s), 0); /* no message of the next step for that wildcard receive */
    /* 0 and 1 swap, 2 with itself */
    int peer = rank == 2 ? 2 : 1 - rank;
    EXPECT(sperli_sendrecv(s, peer, 72, &me, sizeof me, peer, 72, &st), 0);
    CHECK(is_status(st, peer, 72, 4) && result(&got, sizeof got) == 4 && got == peer);
    free(out);
    free(in);
    EXPECT(sperli_barrier(s), 0);
}

/* more_collectives: allgather, alltoall and reduce_scatter at a small size
 * and one past the schedule switch (64 KiB), on comm (of size sz, this
 * rank me); ranks names each rank's job rank, which makes its data. */
static void more_collectives(sperli_t comm, int me, int sz, const int *ranks) {
    size_t n;
    static const size_t sizes[] = {5, 100000};
    for (int z = 0; z < 2; z++) {
        size_t b = sizes[z];
        unsigned char *d = malloc(b * sz), *r = malloc(b * sz);
        /* allgather: block i is rank i's */
        for (size_t k = 0; k < b; k++) d[k] = pat(ranks[me], 0, k);
        EXPECT(sperli_allgather(comm, d, b, &n), 0);
        CHECK(n == b * sz && result(r, b * sz) == n);
        int same = 1;
        for (int i = 0; i < sz; i++)
            for (size_t k = 0; k < b; k++) same &= r[i * b + k] == pat(ranks[i], 0, k);
        CHECK(same);
        /* alltoall: block j of rank i goes to rank j */
        for (int j = 0; j < sz; j++)
            for (size_t k = 0; k < b; k++) d[j * b + k] = pat(ranks[me], j, k);
        EXPECT(sperli_alltoall(comm, d, b * sz, &n), 0);
        CHECK(n == b * sz && result(r, b * sz) == n);
        same = 1;
        for (int i = 0; i < sz; i++)
            for (size_t k = 0; k < b; k++) same &= r[i * b + k] == pat(ranks[i], me, k);
        CHECK(same);
        free(d);
        free(r);
        /* reduce_scatter: int64 sums and float64 sums folded in rank order */
        size_t e = z == 0 ? 2 : 12000; /* elements per block */
        int64_t *iv = malloc(e * sz * 8), *ir = malloc(e * 8);
        double *fv = malloc(e * sz * 8), *fr = malloc(e * 8);
        for (int j = 0; j < sz; j++)
            for (size_t k = 0; k < e; k++) {
                iv[j * e + k] = (int64_t)ranks[me] * 1000003 + j * 1009 + (int64_t)k - 7;
                fv[j * e + k] = (ranks[me] % 2 ? 1e16 : 0.25) * (double)(j + 1) + (double)k * 0.1 * ranks[me];
            }
        EXPECT(sperli_reduce_scatter(comm, SPERLI_INT64, SPERLI_SUM, iv, e * sz * 8, &n), 0);
        CHECK(n == e * 8 && result(ir, e * 8) == n);
        same = 1;
        for (size_t k = 0; k < e; k++) {
            int64_t want = 0;
            for (int i = 0; i < sz; i++) want += (int64_t)ranks[i] * 1000003 + me * 1009 + (int64_t)k - 7;
            same &= ir[k] == want;
        }
        CHECK(same);
        EXPECT(sperli_reduce_scatter(comm, SPERLI_FLOAT64, SPERLI_SUM, fv, e * sz * 8, &n), 0);
        CHECK(n == e * 8 && result(fr, e * 8) == n);
        same = 1;
        for (size_t k = 0; k < e; k++) {
            double want = 0;
            for (int i = 0; i < sz; i++) {
                double x = (ranks[i] % 2 ? 1e16 : 0.25) * (double)(me + 1) + (double)k * 0.1 * ranks[i];
                want = i == 0 ? x : want + x; /* ((r0 + r1) + r2) */
            }
            same &= memcmp(&fr[k], &want, 8) == 0;
        }
        CHECK(same);
        free(iv);
        free(ir);
        free(fv);
        free(fr);
    }
    /* wrong on one rank only: H1618 on every rank, the communicator goes on */
    char x[8] = {0};
    EXPECT(sperli_alltoall(comm, x, me == sz - 1 && sz > 1 ? (size_t)sz + 1 : (size_t)sz, &n), sz > 1 ? SPERLI_H1618 : 0);
    EXPECT(sperli_reduce_scatter(comm, me == 0 ? SPERLI_BYTES : SPERLI_INT32, SPERLI_SUM, x, 4 * (size_t)sz, &n),
           SPERLI_H1618);
    EXPECT(sperli_barrier(comm), 0);
}

/* split: several colors at once, ranks as MPI_Comm_split gives them,
 * collectives and point-to-point within each, the same tag on the job and
 * a communicator never crossing, a nested split, comm_free. */
static void splits(void) {
    size_t n;
    int r, z;
    sperli_status st;
    /* A: by parity, the key reversing the order: {2, 0} and {1} */
    sperli_t a = 0, b = 0, c = 0, none = 77;
    EXPECT(sperli_split(s, rank % 2, -rank, &a), 0);
    CHECK(a > 0 && a != s);
    EXPECT(sperli_rank(a, &r), 0);
    EXPECT(sperli_size(a, &z), 0);
    if (rank == 1)
        CHECK(r == 0 && z == 1);
    else
        CHECK(r == (rank == 2 ? 0 : 1) && z == 2);
    /* B: rank 2 joins none; C: three colors, one rank each */
    EXPECT(sperli_split(s, rank == 2 ? SPERLI_UNDEFINED : 0, 0, rank == 2 ? &none : &b), 0);
    if (rank == 2) CHECK(none == SPERLI_NONE);
    EXPECT(sperli_split(s, rank, 0, &c), 0);
    EXPECT(sperli_size(c, &z), 0);
    CHECK(z == 1);
    EXPECT(sperli_rank(c, &r), 0);
    CHECK(r == 0);

    /* A's reductions: the job ranks of each color */
    int64_t mine = rank, sum = -1;
    EXPECT(sperli_allreduce(a, SPERLI_INT64, SPERLI_SUM, &mine, sizeof mine, &n), 0);
    CHECK(result(&sum, sizeof sum) == 8 && sum == (rank % 2 ? 1 : 2));
    int ga[2] = {2, 0}, gb[2] = {0, 1}, g1[1] = {1}, gself[1] = {rank};
    if (rank == 1)
        more_collectives(a, 0, 1, g1);
    else
        more_collectives(a, rank == 2 ? 0 : 1, 2, ga);
    more_collectives(c, 0, 1, gself);
    if (rank != 2) more_collectives(b, rank, 2, gb);

    /* the same tag on the job and on A: each receive gets its own. Job
     * rank 2 is rank 0 of A and receives from A's rank 1 (job rank 0)
     * before that message is sent. */
    char m[16] = {0};
    if (rank == 0) {
        EXPECT(sperli_send(s, 2, 60, "job", 3), 0);
        EXPECT(sperli_recv(s, 2, 61, &n), 0); /* rank 2 waits in A's receive now, or soon */
        EXPECT(sperli_send(a, 0, 60, "sub", 3), 0);
        EXPECT(sperli_recv_from(a, SPERLI_ANY_SOURCE, 60, &st), 0);
        CHECK(is_status(st, 0, 60, 4) && result(m, sizeof m) == 4 && memcmp(m, "back", 4) == 0);
    } else if (rank == 2) {
        EXPECT(sperli_send(s, 0, 61, NULL, 0), 0);
        EXPECT(sperli_recv(a, 1, 60, &n), 0);
        CHECK(n == 3 && result(m, sizeof m) == 3 && memcmp(m, "sub", 3) == 0);
        EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, 60, &st), 0);
        CHECK(is_status(st, 0, 60, 3) && result(m, sizeof m) == 3 && memcmp(m, "job", 3) == 0);
        EXPECT(sperli_sendrecv(a, 1, 60, "back", 4, 1, 62, &st), 0); /* rank 0 answers on 62 */
    }
    if (rank == 0) EXPECT(sperli_send(a, 0, 62, "ok", 2), 0);
    if (rank == 2) CHECK(is_status(st, 1, 62, 2));
    EXPECT(sperli_send(a, 2, 1, "x", 1), SPERLI_E_RANK); /* A has at most 2 ranks */
    EXPECT(sperli_probe(c, 1, 1, &st), SPERLI_E_RANK);

    /* B: a bcast from its rank 1 (job rank 1), a nested split of A */
    if (rank != 2) {
        char bb[8] = {0};
        EXPECT(sperli_bcast(b, 1, rank == 1 ? "bee" : NULL, rank == 1 ? 3 : 0, &n), 0);
        CHECK(n == 3 && result(bb, sizeof bb) == 3 && memcmp(bb, "bee", 3) == 0);
    }
    sperli_t d = 0;
    EXPECT(sperli_split(a, 0, rank, &d), 0); /* within A, ordered by job rank again */
    EXPECT(sperli_rank(d, &r), 0);
    CHECK(r == (rank == 2 ? 1 : 0));
    EXPECT(sperli_barrier(d), 0);

    /* the job's functions take the session only; free the communicators */
    int stx = 99;
    EXPECT(sperli_finish(a), SPERLI_E_COMM);
    EXPECT(sperli_checkpoint(c, "x", 1), SPERLI_E_COMM);
    EXPECT(sperli_exit(d, 1, &stx), SPERLI_E_COMM);
    CHECK(stx == 99);
    EXPECT(sperli_comm_free(s), SPERLI_E_COMM);
    EXPECT(sperli_comm_free(a), 0);
    EXPECT(sperli_barrier(a), SPERLI_E_COMM);
    EXPECT(sperli_comm_free(a), SPERLI_E_COMM);
    EXPECT(sperli_barrier(d), 0); /* the nested one goes on */
    EXPECT(sperli_comm_free(d), 0);
    EXPECT(sperli_comm_free(c), 0);
    if (rank != 2) EXPECT(sperli_comm_free(b), 0);
    EXPECT(sperli_barrier(s), 0);
}

static void ring(void) {
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    sperli_op rop, sop;
    size_t n;
    char msg[32], got[32] = {0};
    snprintf(msg, sizeof msg, "from %d", rank);
    EXPECT(sperli_start_recv(s, prev, 3, &rop), 0);
    EXPECT(sperli_start_send(s, next, 3, msg, strlen(msg), &sop), 0);
    EXPECT(sperli_finish(s), SPERLI_E_OPEN);
    EXPECT(sperli_finish_send(s, sop), 0);
    EXPECT(sperli_finish_recv(s, rop, &n), 0);
    snprintf(msg, sizeof msg, "from %d", prev);
    CHECK(n == strlen(msg) && result(got, sizeof got) == n && memcmp(got, msg, n) == 0);
    /* tags are kept apart: tag 5 sent before tag 4, received after */
    if (rank == 0) {
        EXPECT(sperli_send(s, 1, 5, "five", 4), 0);
        EXPECT(sperli_send(s, 1, 4, "four", 4), 0);
    } else if (rank == 1) {
        EXPECT(sperli_recv(s, 0, 4, &n), 0);
        CHECK(n == 4 && result(got, sizeof got) == 4 && memcmp(got, "four", 4) == 0);
        EXPECT(sperli_recv(s, 0, 5, &n), 0);
        CHECK(n == 4 && result(got, sizeof got) == 4 && memcmp(got, "five", 4) == 0);
    }
    /* a message of 1 MiB and one of the largest size */
    size_t big = SPERLI_MAX_MESSAGE;
    unsigned char *m = malloc(big);
    for (size_t i = 0; i < big; i++) m[i] = (unsigned char)(i * 7 + 3);
    if (rank == 0) {
        EXPECT(sperli_send(s, 2, 6, m, 1 << 20), 0);
        EXPECT(sperli_send(s, 2, 6, m, big), 0);
    } else if (rank == 2) {
        unsigned char *r = malloc(big);
        EXPECT(sperli_recv(s, 0, 6, &n), 0);
        CHECK(n == 1 << 20 && result(r, big) == n && memcmp(r, m, n) == 0);
        EXPECT(sperli_recv(s, 0, 6, &n), 0);
        CHECK(n == big);
        EXPECT(sperli_result(s, r, big - 1, &n), SPERLI_E_LENGTH);
        CHECK(n == big);
        CHECK(result(r, big) == big && memcmp(r, m, big) == 0);
        free(r);
    }
    free(m);
    EXPECT(sperli_barrier(s), 0);
}

/* busy: rank 1 waits in sperli_recv in a thread; every call of its main
 * thread meanwhile is SPERLI_E_BUSY. Rank 0 sends the message after a
 * second: the main thread has that long to see the thread in the call. */
static void busy(void) {
    size_t n = 99;
    int i = 99;
    if (rank == 1) {
        struct waiter w = {0, 0, 0};
        pthread_t th;
        pthread_create(&th, NULL, wait_recv, &w);
        int seen = 0;
        for (int k = 0; k < 900 && !seen && !w.done; k++) {
            if (sperli_heartbeat(s) == SPERLI_E_BUSY)
                seen = 1;
            else
                sleep_ms(1);
        }
        CHECK(seen);
        if (!seen) { /* the calls below would run for real */
            pthread_join(th, NULL);
            EXPECT(sperli_barrier(s), 0);
            return;
        }
        sperli_op op = 99;
        char buf[8];
        int st = 99;
        EXPECT(sperli_send(s, 0, 1, "x", 1), SPERLI_E_BUSY);
        EXPECT(sperli_recv(s, 0, 7, &n), SPERLI_E_BUSY);
        EXPECT(sperli_start_recv(s, 0, 7, &op), SPERLI_E_BUSY);
        EXPECT(sperli_barrier(s), SPERLI_E_BUSY);
        EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, buf, 8, &n), SPERLI_E_BUSY);
        EXPECT(sperli_rank(s, &i), SPERLI_E_BUSY);
        EXPECT(sperli_result(s, buf, sizeof buf, &n), SPERLI_E_BUSY);
        EXPECT(sperli_set_silence(s, 1000), SPERLI_E_BUSY);
        EXPECT(sperli_finish(s), SPERLI_E_BUSY);
        EXPECT(sperli_abort(s), SPERLI_E_BUSY);
        EXPECT(sperli_exit(s, 0, &st), SPERLI_E_BUSY);
        EXPECT(sperli_init_stdin(&s), SPERLI_E_BUSY);
        sperli_status bst = {99, 99, 99};
        int flag = 99;
        sperli_t nc = 99;
        EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, 7, &bst), SPERLI_E_BUSY);
        EXPECT(sperli_probe(s, 0, 7, &bst), SPERLI_E_BUSY);
        EXPECT(sperli_iprobe(s, 0, 7, &flag, &bst), SPERLI_E_BUSY);
        EXPECT(sperli_sendrecv(s, 0, 1, "x", 1, 0, 7, &bst), SPERLI_E_BUSY);
        EXPECT(sperli_allgather(s, buf, 8, &n), SPERLI_E_BUSY);
        EXPECT(sperli_alltoall(s, buf, 6, &n), SPERLI_E_BUSY);
        EXPECT(sperli_reduce_scatter(s, SPERLI_INT64, SPERLI_SUM, buf, 8, &n), SPERLI_E_BUSY);
        EXPECT(sperli_split(s, 0, 0, &nc), SPERLI_E_BUSY);
        EXPECT(sperli_comm_free(s), SPERLI_E_BUSY);
        CHECK(flag == 99 && nc == 99 && bst.source == 99 && bst.tag == 99 && bst.len == 99);
        CHECK(n == 99 && i == 99 && op == 99 && st == 99 && !w.done);
        pthread_join(th, NULL);
        EXPECT(w.rc, 0);
        char got[8] = {0};
        CHECK(w.n == 4 && result(got, sizeof got) == 4 && memcmp(got, "ping", 4) == 0);
    } else if (rank == 0) {
        sleep_ms(1000);
        EXPECT(sperli_send(s, 1, 7, "ping", 4), 0);
    }
    EXPECT(sperli_barrier(s), 0);
}

/* Rank 2 finishes first; ranks 0 and 1 then see SPERLI_E_FINISHED for it
 * (H1617 in Go) and go on. */
static int ending(void) {
    size_t n = 0;
    int st = 1;
    if (rank == 2) {
        EXPECT(sperli_finish(s), 0);
        EXPECT(sperli_barrier(s), SPERLI_E_HANDLE);
        /* standard input is the launcher's control channel: no second job */
        sperli_t again = 77;
        EXPECT(sperli_init_stdin(&again), SPERLI_H1615);
        CHECK(again == 77);
        EXPECT(sperli_exit(SPERLI_NONE, failures ? 1 : 0, &st), 0);
        return st;
    }
    /* a result to keep: SPERLI_E_FINISHED, a negative code, leaves it and
     * *len untouched (issue 16, item 6) */
    char buf[16];
    EXPECT(sperli_send(s, rank, 11, "kept", 4), 0);
    EXPECT(sperli_recv(s, rank, 11, &n), 0);
    CHECK(n == 4);
    n = 12345;
    EXPECT(sperli_recv(s, 2, 9, &n), SPERLI_E_FINISHED);
    CHECK(n == 12345);
    EXPECT(sperli_send(s, 2, 9, "late", 4), SPERLI_E_FINISHED);
    sperli_op op;
    EXPECT(sperli_start_recv(s, 2, 9, &op), 0);
    EXPECT(sperli_finish_recv(s, op, &n), SPERLI_E_FINISHED);
    CHECK(n == 12345);
    EXPECT(sperli_finish_recv(s, op, &n), SPERLI_E_OPERATION); /* op is finished all the same */
    memset(buf, 0, sizeof buf);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 4 && memcmp(buf, "kept", 4) == 0);
    /* the job goes on between ranks 0 and 1 */
    if (rank == 0) {
        EXPECT(sperli_send(s, 1, 10, "still", 5), 0);
    } else {
        EXPECT(sperli_recv(s, 0, 10, &n), 0);
        CHECK(n == 5);
    }
    EXPECT(sperli_exit(s, failures ? 1 : 0, &st), 0);
    return st;
}

int main(void) {
    EXPECT(sperli_init_stdin(&s), 0);
    if (failures) return 1;
    EXPECT(sperli_rank(s, &rank), 0);
    EXPECT(sperli_size(s, &size), 0);
    CHECK(size == 3);
    EXPECT(sperli_barrier(s), 0);
    collectives();
    wildcards();
    shifts();
    {
        int all[3] = {0, 1, 2};
        more_collectives(s, rank, size, all);
    }
    splits();
    ring();
    busy();
    int st = ending();
    if (failures) {
        fprintf(stderr, "test_ranks: rank %d: %d checks failed\n", rank, failures);
        return st ? st : 1;
    }
    printf("test_ranks: rank %d ok\n", rank);
    return st;
}
