/*
 * celastic — C ranks that outlive losses (SPEC §10), run by the Go tests of
 * tests/clib (elastic_test.go) under `sperli run --spares S` with
 * SPERLI_TEST_FAILURE_SCHEDULE:
 *
 *   celastic roll STEPS EVERY
 *       in-place recovery (§10.2): STEPS steps of a small iteration (each
 *       rank's value mixed with the allreduce of all values), a checkpoint
 *       every EVERY steps; a call that answers SPERLI_E_RECOVERED sends the
 *       program back to sperli_resume, which gives the state of the newest
 *       committed epoch, whichever slot holds the rank now. A spare waits
 *       in sperli_init; one the job did not need exits 0 (SPERLI_NOT_NEEDED).
 *       Rank 0 prints "steps=N total=T" — the same with and without losses —
 *       and each rank "rank R slot S generation G recovered K".
 *   celastic ulfm ROUNDS
 *       a program that manages its losses (§10.3): SPERLI_LOSS_RETURN, then
 *       ROUNDS allreduces of 1 each; one that fails (1611, or 1626 from a
 *       revoke) makes the rank note sperli_failed, revoke, shrink and redo
 *       the round in the smaller world, with an agree that every rank came
 *       through and the least of the rounds done (a round the loss cut may
 *       have ended at some ranks only). Rank 0 prints "size=N rounds=R total=T generation=G".
 *   celastic grow ROUNDS
 *       as ulfm, but with sperli_grow: a promoted spare joins in a later
 *       generation and runs from its start, the size stays; a round is an
 *       allreduce of the rounds done (SPERLI_MAX), which brings the spare
 *       to where the others are. Each rank prints "rank R size N
 *       generation G joined J rounds R".
 *
 * Every call's code is checked; a wrong one ends the rank with its message.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sperli.h"

static int end(sperli_t h, int rc) {
    if (rc != 0 && rc != SPERLI_NOT_NEEDED) {
        char msg[1024];
        size_t n;
        if (sperli_last_error(msg, sizeof msg, &n) == 0) fprintf(stderr, "celastic: %s\n", msg);
    }
    int st = 1;
    sperli_exit(h, rc, &st);
    return st;
}

/* The state a checkpoint holds. */
struct state {
    int64_t step, value;
};

static int64_t mix(int64_t v, int64_t all, int64_t step, int rank) {
    return (int64_t)(((uint64_t)v * 6364136223846793005ULL + (uint64_t)all + (uint64_t)step * 31 + (uint64_t)rank) %
                     1000000007ULL);
}

static int roll(sperli_t s, int64_t steps, int64_t every) {
    int rc, recovered = 0;
    if ((rc = sperli_use_checkpoints(s, "")) != 0) return end(s, rc);
again:;
    int rank, size, resumed;
    size_t n;
    struct state st = {0, 0};
    sperli_rank(s, &rank);
    sperli_size(s, &size);
    rc = sperli_resume(s, &resumed, &n);
    if (rc == SPERLI_E_RECOVERED) goto lost;
    if (rc != 0) return end(s, rc);
    if (resumed) {
        if (n != sizeof st || (rc = sperli_result(s, &st, sizeof st, &n)) != 0) {
            fprintf(stderr, "celastic: resumed %zu bytes, want %zu\n", n, sizeof st);
            return end(s, rc ? rc : 1);
        }
    } else {
        st.value = rank + 1;
    }
    while (st.step < steps) {
        int64_t all;
        rc = sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, &st.value, sizeof st.value, &n);
        if (rc == SPERLI_E_RECOVERED) goto lost;
        if (rc != 0) return end(s, rc);
        if ((rc = sperli_result(s, &all, sizeof all, &n)) != 0) return end(s, rc);
        st.value = mix(st.value, all, st.step, rank);
        st.step++;
        if (st.step % every == 0) {
            rc = sperli_checkpoint(s, &st, sizeof st);
            if (rc == SPERLI_E_RECOVERED) goto lost;
            if (rc != 0) return end(s, rc);
        }
    }
    int64_t total;
    rc = sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, &st.value, sizeof st.value, &n);
    if (rc == SPERLI_E_RECOVERED) goto lost;
    if (rc != 0) return end(s, rc);
    sperli_result(s, &total, sizeof total, &n);
    uint32_t gen;
    int slot;
    sperli_generation(s, &gen);
    sperli_slot(s, &slot);
    if (rank == 0) printf("steps=%lld total=%lld\n", (long long)st.step, (long long)total);
    printf("rank %d slot %d generation %u recovered %d\n", rank, slot, gen, recovered);
    fflush(stdout);
    rc = sperli_finish(s);
    if (rc == SPERLI_E_RECOVERED) goto lost;
    if (rc != 0) return end(SPERLI_NONE, rc);
    return end(SPERLI_NONE, 0);
lost:
    recovered++;
    {
        char msg[1024];
        size_t m;
        if (sperli_last_error(msg, sizeof msg, &m) == 0) fprintf(stderr, "celastic: %s\n", msg);
    }
    goto again;
}

/* round1 makes one allreduce of v on s (SPERLI_SUM, or SPERLI_MAX): 0 and
 * *got, or the code. */
static int round1(sperli_t s, int reduction, int64_t v, int64_t *got) {
    size_t n;
    int rc = sperli_allreduce(s, SPERLI_INT64, reduction, &v, sizeof v, &n);
    if (rc == 0) rc = sperli_result(s, got, sizeof *got, &n);
    return rc;
}

static int ulfm(sperli_t s, int64_t rounds, int grow) {
    int rc;
    uint32_t joined;
    sperli_generation(s, &joined);
    if ((rc = sperli_set_on_loss(s, SPERLI_LOSS_RETURN)) != 0) return end(s, rc);
    int64_t done = 0, total = 0, last = 0;
    for (int attempt = 0; done < rounds && attempt < 100; attempt++) {
        int64_t got;
        /* grow: a promoted spare starts from 0; the max of the rounds done
         * brings it to where the others are (as tests/elastic's grow.star) */
        rc = grow ? round1(s, SPERLI_MAX, done, &got) : round1(s, SPERLI_SUM, 1, &got);
        if (rc == 0) {
            if (grow) {
                done = got + 1;
            } else {
                done++;
                total += got;
                last = got;
            }
            continue;
        }
        if (rc != SPERLI_H1611 && rc != SPERLI_H1626) return end(s, rc);
        int failed[16];
        size_t nf;
        if ((rc = sperli_failed(s, failed, 16, &nf)) != 0) return end(s, rc);
        if ((rc = sperli_revoke(s)) != 0) return end(s, rc);
        sperli_t was = s;
        rc = grow ? sperli_grow(s, &s) : sperli_shrink(s, &s);
        if (rc != 0) return end(s, rc);
        if (s != was) {
            fprintf(stderr, "celastic: shrink gave handle %d for session %d\n", s, was);
            return end(s, 1);
        }
        if (grow) continue; /* the promoted spare runs from its start: no agree to meet */
        /* Every rank came through the shrink: the AND of their flags. */
        uint64_t flag = 1;
        if ((rc = sperli_agree(s, &flag)) != 0) return end(s, rc);
        if (flag != 1) {
            fprintf(stderr, "celastic: agree gave %llu, want 1\n", (unsigned long long)flag);
            return end(s, 1);
        }
        /* A collective the loss cut may have completed at some ranks and
         * failed at others (as in MPI's ULFM): the survivors agree on the
         * rounds every one of them did, and one that did one more takes it
         * back and does it again in the smaller world. */
        int64_t least;
        if ((rc = round1(s, SPERLI_MIN, done, &least)) != 0) return end(s, rc);
        if (least < done) {
            if (done - least != 1) {
                fprintf(stderr, "celastic: %lld rounds done here, %lld by another rank\n", (long long)done, (long long)least);
                return end(s, 1);
            }
            done = least;
            total -= last;
        }
    }
    int rank, size;
    uint32_t gen;
    sperli_rank(s, &rank);
    sperli_size(s, &size);
    sperli_generation(s, &gen);
    if (grow)
        printf("rank %d size %d generation %u joined %u rounds %lld\n", rank, size, gen, joined, (long long)done);
    else if (rank == 0)
        printf("size=%d rounds=%lld total=%lld generation=%u\n", size, (long long)done, (long long)total, gen);
    fflush(stdout);
    return end(s, 0);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: celastic roll STEPS EVERY | ulfm ROUNDS | grow ROUNDS\n");
        return 2;
    }
    sperli_t s;
    int rc = sperli_init_stdin(&s);
    if (rc != 0) return end(SPERLI_NONE, rc); /* SPERLI_NOT_NEEDED: status 0 */
    if (strcmp(argv[1], "roll") == 0 && argc == 4) return roll(s, atoll(argv[2]), atoll(argv[3]));
    if (strcmp(argv[1], "ulfm") == 0) return ulfm(s, atoll(argv[2]), 0);
    if (strcmp(argv[1], "grow") == 0) return ulfm(s, atoll(argv[2]), 1);
    fprintf(stderr, "celastic: unknown mode %s\n", argv[1]);
    return end(s, 1);
}
