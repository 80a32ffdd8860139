/*
 * cwork — a C rank of a work queue (SPEC §19), for tests/clib: the queue
 * "wq" of N items "0" … "N-1", each result f(item) as text, as
 * tests/elastic/testdata/wq.star computes it, so that C and Starlark ranks
 * share one queue. Rank 0 prints every result and the statistics in the
 * same lines as wq.star; the calls' argument checks are tried first.
 *
 *   bin/sperli run -n 3 bin/cwork 200
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sperli.h"

static int64_t f(int64_t x) { return (x * x * 31 + 7) % 100003; }

static int end(sperli_t s, int rc) {
    int status = 1;
    if (sperli_exit(s, rc, &status) != 0) return 1;
    return status;
}

/* want checks a call's code; a mismatch ends the rank with status 3. */
#define want(call, code)                                                              \
    do {                                                                              \
        int got_ = (call);                                                            \
        if (got_ != (code)) {                                                         \
            fprintf(stderr, "cwork: %s = %d, want %d\n", #call, got_, (int)(code)); \
            exit(3);                                                                  \
        }                                                                             \
    } while (0)

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "cwork: N %s: want 1 … 100000\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    sperli_t s;
    int rc = sperli_init_stdin(&s);
    if (rc != 0) return end(SPERLI_NONE, rc);
    int rank;
    sperli_rank(s, &rank);

    char (*text)[16] = calloc((size_t)n, sizeof *text);
    const void **items = calloc((size_t)n, sizeof *items);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    if (text == NULL || items == NULL || lens == NULL) return end(s, 1);
    for (long i = 0; i < n; i++) {
        lens[i] = (size_t)snprintf(text[i], sizeof text[i], "%ld", i);
        items[i] = text[i];
    }

    /* Wrong arguments: refused here, nothing sent. */
    sperli_work wq = 77;
    want(sperli_work_start(s, NULL, items, lens, (size_t)n, &wq), SPERLI_E_NULL);
    want(sperli_work_start(s, "wq", NULL, lens, (size_t)n, &wq), SPERLI_E_NULL);
    want(sperli_work_start(s, "wq", items, lens, 0, &wq), SPERLI_E_COUNT);
    want(sperli_work_start(s, "wq", items, lens, (size_t)n, NULL), SPERLI_E_NULL);
    want(sperli_work_next(77, NULL, NULL), SPERLI_E_HANDLE);
    if (wq != 77) return end(s, 1);

    if ((rc = sperli_work_start(s, "wq", items, lens, (size_t)n, &wq)) != 0) return end(s, rc);
    int64_t id = 0, first = 1;
    size_t len = 0;
    char buf[32];
    for (;;) {
        if ((rc = sperli_work_next(wq, &id, &len)) != 0) return end(s, rc);
        if (id < 0) break;
        if (first) {
            /* Every rank holds a task before any gives a result, as in
             * wq.star (whose ranks this one meets): the same barrier. */
            if ((rc = sperli_barrier(s)) != 0) return end(s, rc);
            if ((rc = sperli_work_next(wq, &id, &len)) != SPERLI_E_OPERATION) return end(s, rc ? rc : 1); /* not done yet */
            want(sperli_work_done(wq, id + 1, "x", 1), SPERLI_E_OPERATION);
            want(sperli_work_result(wq, 0, &len), SPERLI_E_OPERATION); /* not ended */
            first = 0;
        }
        char data[32] = {0};
        if (len >= sizeof data || (rc = sperli_result(s, data, sizeof data - 1, &len)) != 0) return end(s, rc ? rc : 1);
        int64_t x = strtoll(data, NULL, 10);
        int k = snprintf(buf, sizeof buf, "%" PRId64, f(x));
        if ((rc = sperli_work_done(wq, id, buf, (size_t)k)) != 0) return end(s, rc);
    }
    sperli_work_statistics st;
    want(sperli_work_stats(wq, NULL), SPERLI_E_NULL);
    if ((rc = sperli_work_stats(wq, &st)) != 0) return end(s, rc);
    want(sperli_work_result(wq, n, &len), SPERLI_E_COUNT);
    /* by_rank: every execution is some slot's, and no slot past the job's. */
    int64_t ranks = 0, sum = 0, by = 0;
    want(sperli_work_by_rank(wq, 0, NULL), SPERLI_E_NULL);
    want(sperli_work_by_rank(wq, -1, &by), SPERLI_E_COUNT);
    for (int64_t slot = 0;; slot++) {
        rc = sperli_work_by_rank(wq, slot, &by);
        if (rc == SPERLI_E_COUNT) break;
        if (rc != 0) return end(s, rc);
        sum += by;
        ranks += by > 0;
    }
    if (sum != st.executed) return end(s, 1);
    if (rank == 0) {
        for (long i = 0; i < n; i++) {
            char r[32] = {0};
            if ((rc = sperli_work_result(wq, i, &len)) != 0) return end(s, rc);
            if (len >= sizeof r || (rc = sperli_result(s, r, sizeof r - 1, &len)) != 0) return end(s, rc ? rc : 1);
            printf("item %ld %s\n", i, r);
        }
        printf("stats items=%" PRId64 " published=%" PRId64 " executed=%" PRId64 " duplicates=%" PRId64 " generations=%" PRId64 " ranks=%" PRId64 "\n",
               st.items, st.published, st.executed, st.duplicates, st.generations, ranks);
    }
    free(text);
    free(items);
    free(lens);
    return end(s, 0);
}
