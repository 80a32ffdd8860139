/*
 * csum — the sum example of SPEC §16 as a C rank, on libsperli.
 *
 *   sh scripts/libsperli/build.sh
 *   cc -O2 -I libsperli/c/linux -o bin/csum scripts/examples/csum.c \
 *      libsperli/c/linux/libsperli.a -lpthread
 *   bin/sperli run -n 3 bin/csum [ROWS]
 *
 * ROWS rows (default 3,000,000), row i holding the value i+1. The first
 * ROWS mod size ranks get one row more; the parts follow each other from
 * row 0. Every rank sums its rows, a reduce to rank 0 (int64, sum) gives
 * the total, and rank 0 prints
 *
 *   rows=3000000 total=4500001500000 expected=4500001500000 ok
 *
 * (bad in place of ok on a mismatch, and exit status 1). C, Go and
 * Starlark ranks of this example can be mixed in one job.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sperli.h"

/* end reports a failed call and ends the rank with sperli_exit's status. */
static int end(sperli_t s, int rc) {
    int status = 1;
    if (sperli_exit(s, rc, &status) != 0) return 1;
    return status;
}

int main(int argc, char **argv) {
    int64_t rows = 3000000;
    if (argc > 1) {
        char *e;
        errno = 0;
        long long n = strtoll(argv[1], &e, 10);
        if (errno != 0 || *e != 0 || e == argv[1] || n < 0) {
            fprintf(stderr, "csum: ROWS %s: want a whole number of at least 0\n", argv[1]);
            return 2;
        }
        rows = n;
    }

    sperli_t s;
    int rc = sperli_init_stdin(&s);
    if (rc != 0) return end(SPERLI_NONE, rc);
    int rank, size;
    sperli_rank(s, &rank);
    sperli_size(s, &size);

    /* This rank's rows: first … first+count-1, values first+1 … first+count. */
    int64_t base = rows / size, extra = rows % size;
    int64_t count = base + (rank < extra ? 1 : 0);
    int64_t first = rank * base + (rank < extra ? rank : extra);
    int64_t part = 0;
    for (int64_t v = first + 1; v <= first + count; v++) part += v;

    unsigned char le[8], total[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)part >> (8 * i));
    size_t n;
    rc = sperli_reduce(s, 0, SPERLI_INT64, SPERLI_SUM, le, sizeof le, &n);
    if (rc != 0) return end(s, rc);
    if (rank != 0) return end(s, 0);

    if (n != sizeof total || (rc = sperli_result(s, total, sizeof total, &n)) != 0) {
        fprintf(stderr, "csum: the result is %zu bytes, want 8\n", n);
        return end(s, rc != 0 ? rc : 1);
    }
    uint64_t got = 0;
    for (int i = 0; i < 8; i++) got |= (uint64_t)total[i] << (8 * i);
    int64_t want = rows * (rows + 1) / 2;
    int ok = (int64_t)got == want;
    printf("rows=%" PRId64 " total=%" PRId64 " expected=%" PRId64 " %s\n", rows, (int64_t)got, want,
           ok ? "ok" : "bad");
    fflush(stdout);
    return end(s, ok ? 0 : 1);
}
