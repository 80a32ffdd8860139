/*
 * cpeer — a C rank on libsperli that the Go tests of tests/clib drive:
 *
 *   cpeer codes          print every code and its sperli_strerror text
 *   cpeer echo           join (description on stdin), then with the other
 *                        rank of a job of two: receive tag 5, send it back
 *                        on tag 6, finish
 *   cpeer cancel         join a job of two; a thread waits in sperli_recv
 *                        (tag 5) and the main thread cancels it
 *                        (pthread_cancel), prints "cancelled", and wants
 *                        the call to run to its end all the same; then it
 *                        sends the message back on tag 6 and prints
 *                        "cancel=ok"
 *   cpeer calls13        join a job of three or more beside ranks of
 *                        another language, and make with them the calls of
 *                        issue 13 that TestMixedCalls13 (tests/clib) makes
 *                        on its Go rank, checking each result against the
 *                        formulas both sides share; prints "calls13=ok"
 *   cpeer bench P M      join a job of two; rank 0 measures P round trips
 *                        of 64 bytes and the one-way rate of M messages of
 *                        1 MiB to rank 1, and prints
 *                        "rtt_us=… rate_mbs=…" (MB = 10^6 bytes)
 *
 * Every mode that joins prints "init=CODE" first (0 when it joined) and
 * ends with sperli_exit's status; a failed call's message goes to stderr.
 * The bench protocol is the one of tests/clib/gopeer, so C and Go ranks
 * pair up in any order.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sperli.h"

static sperli_t s;
static int rank, peer;

static int end(sperli_t h, int rc) {
    if (rc != 0) {
        char msg[1024];
        size_t n;
        if (sperli_last_error(msg, sizeof msg, &n) == 0) fprintf(stderr, "cpeer: %s\n", msg);
    }
    int st = 1;
    sperli_exit(h, rc, &st);
    return st;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define TRY(call)                                                                            \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != 0) return rc_;                                                            \
    } while (0)

static int echo(void) {
    size_t n;
    char buf[256];
    TRY(sperli_recv(s, peer, 5, &n));
    if (n > sizeof buf) return SPERLI_E_LENGTH;
    TRY(sperli_result(s, buf, sizeof buf, &n));
    TRY(sperli_send(s, peer, 6, buf, n));
    return 0;
}

struct waiter {
    int rc;
    size_t n;
    volatile int returned;
};

/* recv_thread waits in sperli_recv; cancellation takes effect at the
 * pthread_testcancel after it, never inside the call. */
static void *recv_thread(void *arg) {
    struct waiter *w = arg;
    int rc;
    while ((rc = sperli_recv(s, peer, 5, &w->n)) == SPERLI_E_BUSY) sched_yield();
    w->rc = rc;
    w->returned = 1;
    pthread_testcancel();
    w->returned = 2; /* not reached */
    return NULL;
}

static int cancel_wait(void) {
    struct waiter w = {0, 0, 0};
    pthread_t th;
    int i, seen = 0;
    struct timespec ms = {0, 1000000};
    pthread_create(&th, NULL, recv_thread, &w);
    for (int k = 0; k < 20000 && !seen && !w.returned; k++) {
        if (sperli_rank(s, &i) == SPERLI_E_BUSY)
            seen = 1;
        else
            nanosleep(&ms, NULL);
    }
    if (!seen) fprintf(stderr, "cpeer: the thread was never seen in sperli_recv\n");
    pthread_cancel(th);
    printf("cancelled\n");
    fflush(stdout);
    void *res = NULL;
    pthread_join(th, &res);
    if (!seen || res != PTHREAD_CANCELED || w.returned != 1 || w.rc != 0) {
        fprintf(stderr, "cpeer: cancelled thread: joined %s, returned %d, code %d\n",
                res == PTHREAD_CANCELED ? "cancelled" : "not cancelled", w.returned, w.rc);
        return w.rc != 0 ? w.rc : 1;
    }
    char buf[256];
    size_t n;
    TRY(sperli_result(s, buf, sizeof buf, &n));
    if (n != w.n) return SPERLI_E_LENGTH;
    TRY(sperli_send(s, peer, 6, buf, n));
    printf("cancel=ok\n");
    fflush(stdout);
    return 0;
}

#define WANT(cond)                                                                           \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "cpeer: rank %d: %s does not hold\n", rank, #cond);              \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

/* calls13: the Go side of this is TestMixedCalls13 in tests/clib; the
 * formulas are the same there. */
static int calls13(int size) {
    size_t n;
    unsigned char b[64];
    sperli_status st;
    /* allgather: rank r gives {r, r+10} */
    unsigned char mine[2] = {(unsigned char)rank, (unsigned char)(rank + 10)};
    TRY(sperli_allgather(s, mine, 2, &n));
    TRY(sperli_result(s, b, sizeof b, &n));
    WANT(n == 2 * (size_t)size);
    for (int r = 0; r < size; r++) WANT(b[2 * r] == r && b[2 * r + 1] == r + 10);
    /* alltoall: block j of rank r is {16r + j} */
    unsigned char blocks[16];
    for (int j = 0; j < size; j++) blocks[j] = (unsigned char)(16 * rank + j);
    TRY(sperli_alltoall(s, blocks, (size_t)size, &n));
    TRY(sperli_result(s, b, sizeof b, &n));
    WANT(n == (size_t)size);
    for (int i = 0; i < size; i++) WANT(b[i] == 16 * i + rank);
    /* reduce_scatter: rank r gives int64 100r + j for block j */
    int64_t v[16], got = 0;
    for (int j = 0; j < size; j++) v[j] = 100 * rank + j;
    TRY(sperli_reduce_scatter(s, SPERLI_INT64, SPERLI_SUM, v, 8 * (size_t)size, &n));
    TRY(sperli_result(s, &got, sizeof got, &n));
    WANT(n == 8 && got == 100 * (int64_t)size * (size - 1) / 2 + (int64_t)size * rank);
    /* sendrecv: a ring to the right, from any source */
    char msg[32];
    snprintf(msg, sizeof msg, "from %d", rank);
    TRY(sperli_sendrecv(s, (rank + 1) % size, 5, msg, strlen(msg), SPERLI_ANY_SOURCE, 5, &st));
    int left = (rank + size - 1) % size;
    snprintf(msg, sizeof msg, "from %d", left);
    TRY(sperli_result(s, b, sizeof b, &n));
    WANT(st.source == left && st.tag == 5 && st.len == strlen(msg) && memcmp(b, msg, n) == 0);
    /* split by parity, the key reversing the order */
    sperli_t sub;
    int srank, ssize;
    TRY(sperli_split(s, rank % 2, -rank, &sub));
    TRY(sperli_rank(sub, &srank));
    TRY(sperli_size(sub, &ssize));
    WANT(ssize == (size - rank % 2 + 1) / 2);
    WANT(srank == (size - 1 - rank) / 2);
    int64_t me = rank, sum = 0, want = 0;
    for (int r = rank % 2; r < size; r += 2) want += r;
    TRY(sperli_allreduce(sub, SPERLI_INT64, SPERLI_SUM, &me, 8, &n));
    TRY(sperli_result(s, &sum, sizeof sum, &n));
    WANT(sum == want);
    /* in each communicator, its rank 0 sends to its last rank */
    if (ssize > 1 && srank == 0) TRY(sperli_send(sub, ssize - 1, 6, "sub", 3));
    if (ssize > 1 && srank == ssize - 1) {
        TRY(sperli_recv_from(sub, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st));
        WANT(st.source == 0 && st.tag == 6 && st.len == 3);
    }
    TRY(sperli_comm_free(sub));
    /* probe: rank 1 sends rank 0 a message of 8 bytes on tag 9 */
    if (rank == 1) TRY(sperli_send(s, 0, 9, "probe-me", 8));
    if (rank == 0) {
        TRY(sperli_probe(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st));
        WANT(st.source == 1 && st.tag == 9 && st.len == 8);
        TRY(sperli_recv(s, st.source, st.tag, &n));
        WANT(n == 8);
    }
    TRY(sperli_barrier(s));
    printf("calls13=ok\n");
    fflush(stdout);
    return 0;
}

enum { TAG_PING = 1, TAG_DATA = 2, TAG_ACK = 3, SMALL = 64, BIG = 1 << 20 };

/* bench: rank 0 drives, rank 1 answers. The receiver of every message
 * copies it out of the library, as a C program would. */
static int bench(int pings, int msgs) {
    unsigned char small[SMALL];
    unsigned char *big = malloc(BIG);
    size_t n;
    memset(small, 1, sizeof small);
    memset(big, 2, BIG);
    TRY(sperli_barrier(s));
    int warm = pings / 10 + 10;
    if (rank == 0) {
        double t0 = 0;
        for (int i = 0; i < warm + pings; i++) {
            if (i == warm) t0 = now();
            TRY(sperli_send(s, peer, TAG_PING, small, SMALL));
            TRY(sperli_recv(s, peer, TAG_PING, &n));
            TRY(sperli_result(s, small, sizeof small, &n));
        }
        double rtt = (now() - t0) / pings * 1e6;
        /* a few messages to warm up, acknowledged, then the timed ones */
        for (int i = 0; i < 4; i++) TRY(sperli_send(s, peer, TAG_DATA, big, BIG));
        TRY(sperli_recv(s, peer, TAG_ACK, &n));
        double t1 = now();
        for (int i = 0; i < msgs; i++) TRY(sperli_send(s, peer, TAG_DATA, big, BIG));
        TRY(sperli_recv(s, peer, TAG_ACK, &n));
        double rate = (double)msgs * BIG / 1e6 / (now() - t1);
        printf("rtt_us=%.2f rate_mbs=%.1f\n", rtt, rate);
        fflush(stdout);
    } else {
        for (int i = 0; i < warm + pings; i++) {
            TRY(sperli_recv(s, peer, TAG_PING, &n));
            TRY(sperli_result(s, small, sizeof small, &n));
            TRY(sperli_send(s, peer, TAG_PING, small, n));
        }
        for (int round = 0; round < 2; round++) {
            int k = round == 0 ? 4 : msgs;
            for (int i = 0; i < k; i++) {
                TRY(sperli_recv(s, peer, TAG_DATA, &n));
                TRY(sperli_result(s, big, BIG, &n));
            }
            TRY(sperli_send(s, peer, TAG_ACK, NULL, 0));
        }
    }
    free(big);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "codes") == 0) {
        for (int c = SPERLI_E_MODE; c <= SPERLI_NOT_NEEDED; c++) printf("%d\t%s\n", c, sperli_strerror(c));
        for (int c = 1601; c <= 1628; c++) printf("%d\t%s\n", c, sperli_strerror(c));
        return 0;
    }
    int mode_echo = argc == 2 && strcmp(argv[1], "echo") == 0;
    int mode_cancel = argc == 2 && strcmp(argv[1], "cancel") == 0;
    int mode_bench = argc == 4 && strcmp(argv[1], "bench") == 0;
    int mode_calls13 = argc == 2 && strcmp(argv[1], "calls13") == 0;
    if (!mode_echo && !mode_cancel && !mode_bench && !mode_calls13) {
        fprintf(stderr, "usage: cpeer codes | cpeer echo | cpeer cancel | cpeer calls13 | cpeer bench PINGS MESSAGES\n");
        return 2;
    }
    int rc = sperli_init_stdin(&s);
    printf("init=%d\n", rc);
    fflush(stdout);
    if (rc != 0) return end(SPERLI_NONE, rc);
    int size;
    sperli_rank(s, &rank);
    sperli_size(s, &size);
    if (mode_calls13) return end(s, size >= 3 && size <= 16 ? calls13(size) : SPERLI_E_RANK);
    if (size != 2) return end(s, SPERLI_E_RANK);
    peer = 1 - rank;
    rc = mode_echo ? echo() : mode_cancel ? cancel_wait() : bench(atoi(argv[2]), atoi(argv[3]));
    return end(s, rc);
}
