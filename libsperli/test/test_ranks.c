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
 * results checked; on rank 1 a thread waits in sperli_recv while the main
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
