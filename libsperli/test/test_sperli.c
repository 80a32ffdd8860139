/*
 * test_sperli — every function of libsperli, given each kind of wrong
 * input, answers the code of the table in sperli.h, does nothing else (the
 * job goes on, kept messages and results stay), and never ends the
 * process. Run by scripts/libsperli/check-libsperli.sh:
 *
 *   test_sperli ONE.job TWO.job CKPTDIR < ONE.job-and-more
 *   SPERLI_SPIN_US=abc test_sperli spin ONE.job < ONE.job
 *
 * ONE.job is rank 0 of a job of one rank, TWO.job rank 0 of a job of two
 * ranks whose rank 1 never comes (made by `sperli job make` on a free
 * loopback address), CKPTDIR an empty directory. Standard input is ONE.job's
 * line followed by STDIN_REST (below), which the test reads itself after
 * sperli_init_stdin. It prints one line per failed check on standard error
 * and "test_sperli: ok (N checks)" at the end; the exit status is 0 only
 * when every check held. The "spin" mode wants 1616 from both inits for a
 * SPERLI_SPIN_US outside its range.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sperli.h"

static int checks, failures;

/* What check-libsperli.sh puts on standard input after the description. */
#define STDIN_REST "the program's own input\nsecond line\n"

#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        int want_ = (want);                                                                 \
        checks++;                                                                           \
        if (rc_ != want_) {                                                                 \
            failures++;                                                                     \
            fprintf(stderr, "test_sperli.c:%d: %s = %d (%s), want %d (%s)\n", __LINE__,     \
                    #call, rc_, sperli_strerror(rc_), want_, sperli_strerror(want_));       \
        }                                                                                   \
    } while (0)

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            fprintf(stderr, "test_sperli.c:%d: %s does not hold\n", __LINE__, #cond);        \
        }                                                                                   \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* read_line returns the first line of a file (with its "\n"), malloc'd. */
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

/* with_join_ms returns line with "join_ms" set: a short join window. */
static char *with_join_ms(const char *line, int ms) {
    char *out = malloc(strlen(line) + 64);
    sprintf(out, "{\"join_ms\":%d,%s", ms, line + 1);
    return out;
}

/* replace returns s with the first "from" replaced by "to", malloc'd. */
static char *replace(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    if (p == NULL) return NULL;
    char *out = malloc(strlen(s) + strlen(to) + 1);
    memcpy(out, s, (size_t)(p - s));
    strcpy(out + (p - s), to);
    strcat(out, p + strlen(from));
    return out;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static char msg[4096];

/* last returns the last error's message. */
static const char *last(void) {
    size_t n;
    if (sperli_last_error(msg, sizeof msg, &n) != 0) return "(sperli_last_error failed)";
    return msg;
}

/* every_function_refuses calls every function that takes a session with
 * session s and otherwise right arguments, and wants code want. */
static void every_function_refuses(sperli_t s, int want) {
    char buf[64] = "data";
    size_t n = 99;
    int i = 99, flag = 99;
    uint32_t u = 99;
    sperli_op op = 99;
    sperli_t nc = 99;
    sperli_status st = {99, 99, 99};
    EXPECT(sperli_rank(s, &i), want);
    EXPECT(sperli_size(s, &i), want);
    EXPECT(sperli_job(s, buf, sizeof buf), want);
    EXPECT(sperli_incarnation(s, &u), want);
    EXPECT(sperli_send(s, 0, 1, buf, 4), want);
    EXPECT(sperli_recv(s, 0, 1, &n), want);
    EXPECT(sperli_start_send(s, 0, 1, buf, 4, &op), want);
    EXPECT(sperli_finish_send(s, op), want);
    EXPECT(sperli_start_recv(s, 0, 1, &op), want);
    EXPECT(sperli_finish_recv(s, op, &n), want);
    EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), want);
    EXPECT(sperli_finish_recv_from(s, op, &st), want);
    EXPECT(sperli_probe(s, 0, 1, &st), want);
    EXPECT(sperli_iprobe(s, SPERLI_ANY_SOURCE, 1, &flag, &st), want);
    EXPECT(sperli_sendrecv(s, 0, 1, buf, 4, 0, 1, &st), want);
    EXPECT(sperli_barrier(s), want);
    EXPECT(sperli_bcast(s, 0, buf, 4, &n), want);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT32, SPERLI_SUM, buf, 4, &n), want);
    EXPECT(sperli_allreduce(s, SPERLI_INT32, SPERLI_SUM, buf, 4, &n), want);
    EXPECT(sperli_gather(s, 0, buf, 4, &n), want);
    EXPECT(sperli_scatter(s, 0, buf, 4, &n), want);
    EXPECT(sperli_allgather(s, buf, 4, &n), want);
    EXPECT(sperli_alltoall(s, buf, 4, &n), want);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_SUM, buf, 4, &n), want);
    EXPECT(sperli_split(s, 0, 0, &nc), want);
    EXPECT(sperli_comm_free(s), want);
    EXPECT(sperli_set_silence(s, 1000), want);
    EXPECT(sperli_heartbeat(s), want);
    EXPECT(sperli_use_checkpoints(s, "ckpt"), want);
    EXPECT(sperli_checkpoint(s, buf, 4), want);
    EXPECT(sperli_resume(s, &i, &n), want);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), want);
    EXPECT(sperli_set_on_loss(s, SPERLI_LOSS_RETURN), want);
    {
        int ranks[4] = {99, 99, 99, 99};
        uint64_t fl = 99;
        EXPECT(sperli_failed(s, ranks, 4, &n), want);
        EXPECT(sperli_revoke(s), want);
        EXPECT(sperli_agree(s, &fl), want);
        EXPECT(sperli_shrink(s, &nc), want);
        EXPECT(sperli_grow(s, &nc), want);
        EXPECT(sperli_generation(s, &u), want);
        EXPECT(sperli_slot(s, &i), want);
        EXPECT(sperli_layout(s, ranks, 4, &n), want);
        CHECK(fl == 99 && ranks[0] == 99 && ranks[3] == 99);
    }
    EXPECT(sperli_finish(s), want);
    EXPECT(sperli_abort(s), want);
    /* nothing was written */
    CHECK(n == 99 && i == 99 && u == 99 && op == 99 && strcmp(buf, "data") == 0);
    CHECK(flag == 99 && nc == 99 && st.source == 99 && st.tag == 99 && st.len == 99);
}

/* last_error_any_cap: sperli_last_error takes any capacity, SIZE_MAX too,
 * and writes only the message and its NUL; prefix is the message's start. */
static void last_error_any_cap(const char *prefix) {
    static const size_t caps[] = {SIZE_MAX, SIZE_MAX - 1, (size_t)1 << 63, ((size_t)1 << 63) - 1,
                                  (size_t)1 << 62};
    char want[sizeof msg];
    size_t n0 = 0;
    EXPECT(sperli_last_error(want, sizeof want, &n0), 0);
    CHECK(starts(want, prefix));
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        char *buf = malloc(n0 + 2);
        size_t n = 0;
        memset(buf, 'Z', n0 + 2);
        EXPECT(sperli_last_error(buf, caps[k], &n), 0);
        CHECK(n == n0 && memcmp(buf, want, n0 + 1) == 0 && buf[n0 + 1] == 'Z');
        free(buf);
    }
}

static void test_strerror(void) {
    static const struct {
        int code;
        const char *prefix;
    } table[] = {
        {SPERLI_OK, "ok"},
        {SPERLI_E_NULL, "SPERLI_E_NULL: "},
        {SPERLI_E_LENGTH, "SPERLI_E_LENGTH: "},
        {SPERLI_E_RANK, "SPERLI_E_RANK: "},
        {SPERLI_E_TAG, "SPERLI_E_TAG: "},
        {SPERLI_E_TYPE, "SPERLI_E_TYPE: "},
        {SPERLI_E_OP, "SPERLI_E_OP: "},
        {SPERLI_E_COUNT, "SPERLI_E_COUNT: "},
        {SPERLI_E_HANDLE, "SPERLI_E_HANDLE: "},
        {SPERLI_E_PATH, "SPERLI_E_PATH: "},
        {SPERLI_E_BUSY, "SPERLI_E_BUSY: "},
        {SPERLI_E_OPERATION, "SPERLI_E_OPERATION: "},
        {SPERLI_E_FINISHED, "SPERLI_E_FINISHED: "},
        {SPERLI_E_OPEN, "SPERLI_E_OPEN: "},
        {SPERLI_E_SESSION, "SPERLI_E_SESSION: "},
        {SPERLI_E_FORK, "SPERLI_E_FORK: "},
        {SPERLI_E_COMM, "SPERLI_E_COMM: "},
        {SPERLI_E_RECOVERED, "SPERLI_E_RECOVERED: "},
        {SPERLI_E_MODE, "SPERLI_E_MODE: "},
        {SPERLI_NOT_NEEDED, "SPERLI_NOT_NEEDED: "},
    };
    /* The numbers are stable. */
    CHECK(SPERLI_E_NULL == -1 && SPERLI_E_LENGTH == -2 && SPERLI_E_RANK == -3 && SPERLI_E_TAG == -4 &&
          SPERLI_E_TYPE == -5 && SPERLI_E_OP == -6 && SPERLI_E_COUNT == -7 && SPERLI_E_HANDLE == -8 &&
          SPERLI_E_PATH == -9 && SPERLI_E_BUSY == -10 && SPERLI_E_OPERATION == -11 &&
          SPERLI_E_FINISHED == -12 && SPERLI_E_OPEN == -13 && SPERLI_E_SESSION == -14 &&
          SPERLI_E_FORK == -15 && SPERLI_E_COMM == -16 && SPERLI_E_RECOVERED == -17 &&
          SPERLI_E_MODE == -18);
    CHECK(SPERLI_NOT_NEEDED == 1 && SPERLI_LOSS_RECOVER == 0 && SPERLI_LOSS_RETURN == 1);
    CHECK(SPERLI_ANY_SOURCE == -1 && SPERLI_ANY_TAG == -1 && SPERLI_UNDEFINED == -1 && SPERLI_NONE == 0);
    CHECK(SPERLI_H1616 == 1616 && SPERLI_H1626 == 1626 && SPERLI_H1627 == 1627 && SPERLI_H1628 == 1628);
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        CHECK(starts(sperli_strerror(table[k].code), table[k].prefix));
    for (int c = 1601; c <= 1628; c++) {
        char want[16];
        snprintf(want, sizeof want, "H%d: ", c);
        CHECK(starts(sperli_strerror(c), want));
    }
    CHECK(strcmp(sperli_strerror(-19), "unknown code") == 0);
    CHECK(strcmp(sperli_strerror(2), "unknown code") == 0);
    CHECK(strcmp(sperli_strerror(1600), "unknown code") == 0);
    CHECK(strcmp(sperli_strerror(1629), "unknown code") == 0);
    CHECK(strcmp(sperli_strerror(INT_MIN), "unknown code") == 0);
}

static void test_no_session(const char *one) {
    size_t n = 99;
    int st = 99;
    sperli_t s = 77;
    /* last_error: nothing yet, and its own wrong arguments */
    EXPECT(sperli_last_error(NULL, 0, NULL), SPERLI_E_NULL);
    EXPECT(sperli_last_error(NULL, 5, &n), SPERLI_E_NULL);
    EXPECT(sperli_last_error(msg, sizeof msg, &n), 0);
    CHECK(n == 0 && msg[0] == 0);

    /* handles that are no session: never given, made up */
    every_function_refuses(SPERLI_NONE, SPERLI_E_HANDLE);
    every_function_refuses(1, SPERLI_E_HANDLE);
    every_function_refuses(-1, SPERLI_E_HANDLE);
    every_function_refuses(12345, SPERLI_E_HANDLE);
    every_function_refuses(INT_MIN, SPERLI_E_HANDLE);
    CHECK(starts(last(), "SPERLI_E_HANDLE: sperli_abort: "));
    EXPECT(sperli_exit(3, 0, &st), SPERLI_E_HANDLE);
    EXPECT(sperli_exit(SPERLI_NONE, 0, NULL), SPERLI_E_NULL);
    /* the handle is checked before status (issue 16, item 9) */
    EXPECT(sperli_exit(12345, 0, NULL), SPERLI_E_HANDLE);
    EXPECT(sperli_exit(-1, 1, NULL), SPERLI_E_HANDLE);
    CHECK(st == 99);
    /* any capacity: only the message and its NUL are written (item 2) */
    last_error_any_cap("SPERLI_E_HANDLE: sperli_exit: ");

    /* init: pointers, length, and descriptions the job refuses */
    EXPECT(sperli_init(NULL, &s), SPERLI_E_NULL);
    EXPECT(sperli_init(one, NULL), SPERLI_E_NULL);
    EXPECT(sperli_init_stdin(NULL), SPERLI_E_NULL);
    char *big = malloc((size_t)SPERLI_MAX_JOB_LINE + 2);
    memset(big, 'x', (size_t)SPERLI_MAX_JOB_LINE + 1);
    big[SPERLI_MAX_JOB_LINE + 1] = 0;
    EXPECT(sperli_init(big, &s), SPERLI_E_LENGTH);
    CHECK(starts(last(), "SPERLI_E_LENGTH: sperli_init: "));
    big[SPERLI_MAX_JOB_LINE] = 0; /* exactly the limit: no length error, but no JSON */
    EXPECT(sperli_init(big, &s), SPERLI_H1615);
    free(big);
    EXPECT(sperli_init("", &s), SPERLI_H1615);
    CHECK(starts(last(), "H1615: job description missing"));
    last_error_any_cap("H1615: job description missing"); /* a message of the Go layer */
    EXPECT(sperli_init("\n", &s), SPERLI_H1615);
    EXPECT(sperli_init("{}", &s), SPERLI_H1615);
    EXPECT(sperli_init("not json", &s), SPERLI_H1615);
    EXPECT(sperli_init("{\"v\":1", &s), SPERLI_H1615);
    char *cut = strdup(one);
    cut[strlen(cut) / 2] = 0;
    EXPECT(sperli_init(cut, &s), SPERLI_H1615);
    free(cut);
    char *unknown = replace(one, "{", "{\"x\":1,");
    EXPECT(sperli_init(unknown, &s), SPERLI_H1615);
    CHECK(strstr(last(), "unknown field") != NULL);
    free(unknown);
    /* a reserved host in the host table: H1614 before anything starts */
    const char *h = strstr(one, "\"host\":\"");
    CHECK(h != NULL);
    if (h != NULL) {
        char host[300];
        const char *a = h + strlen("\"host\":\""), *b = strchr(a, '"');
        snprintf(host, sizeof host, "\"host\":\"%.*s\"", (int)(b - a), a);
        char *refused = replace(one, host, "\"host\":\"x.host-a.invalid\"");
        EXPECT(sperli_init(refused, &s), SPERLI_H1614);
        CHECK(starts(last(), "H1614: "));
        free(refused);
    }
    /* a listen_fd that is no listening socket: 1615, and standard output
     * and error are still open, the same files (issue 16, item 7) */
    for (int fd = 1; fd <= 2; fd++) {
        struct stat before, after;
        char field[32], want[64];
        CHECK(fstat(fd, &before) == 0);
        snprintf(field, sizeof field, "{\"listen_fd\":%d,", fd);
        char *line = replace(one, "{", field);
        EXPECT(sperli_init(line, &s), SPERLI_H1615);
        snprintf(want, sizeof want, "H1615: job description: listen_fd %d is not a listening socket", fd);
        CHECK(starts(last(), want));
        CHECK(fstat(fd, &after) == 0 && after.st_dev == before.st_dev && after.st_ino == before.st_ino);
        free(line);
    }
    char *nofd = replace(one, "{", "{\"listen_fd\":1000000,");
    EXPECT(sperli_init(nofd, &s), SPERLI_H1615);
    free(nofd);
    CHECK(s == 77); /* never written */
}

/* wait_child waits up to 30 s for pid and returns its exit status, or -1
 * (the child is killed) when it did not end or was killed. */
static int wait_child(pid_t pid) {
    int st;
    for (int k = 0; k < 3000; k++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (w < 0 && errno != EINTR) return -1;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* In the child of a fork(2) every function answers SPERLI_E_FORK and does
 * nothing: the parent's session s goes on whole (issue 16, item 5). */
static void test_fork(sperli_t s, const char *one) {
    size_t n = 0;
    char buf[64];
    EXPECT(sperli_send(s, 0, 40, "parent", 6), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0, i = 99, st = 99;
        size_t m = 99;
        sperli_t s2 = 77;
        sperli_op op = 99;
        uint32_t u = 99;
#define FORKED(call) bad += (call) != SPERLI_E_FORK
        FORKED(sperli_rank(s, &i));
        FORKED(sperli_size(s, &i));
        FORKED(sperli_job(s, buf, sizeof buf));
        FORKED(sperli_incarnation(s, &u));
        FORKED(sperli_send(s, 0, 40, "child", 5));
        FORKED(sperli_recv(s, 0, 40, &m));
        FORKED(sperli_start_send(s, 0, 40, "child", 5, &op));
        FORKED(sperli_start_recv(s, 0, 40, &op));
        FORKED(sperli_finish_send(s, op));
        FORKED(sperli_finish_recv(s, op, &m));
        FORKED(sperli_barrier(s));
        FORKED(sperli_bcast(s, 0, "x", 1, &m));
        FORKED(sperli_reduce(s, 0, SPERLI_INT32, SPERLI_SUM, "abcd", 4, &m));
        FORKED(sperli_allreduce(s, SPERLI_INT32, SPERLI_SUM, "abcd", 4, &m));
        FORKED(sperli_gather(s, 0, "x", 1, &m));
        FORKED(sperli_scatter(s, 0, "x", 1, &m));
        {
            sperli_status fst = {99, 99, 99};
            int flag = 99;
            FORKED(sperli_recv_from(s, SPERLI_ANY_SOURCE, 40, &fst));
            FORKED(sperli_finish_recv_from(s, op, &fst));
            FORKED(sperli_probe(s, 0, 40, &fst));
            FORKED(sperli_iprobe(s, 0, 40, &flag, &fst));
            FORKED(sperli_sendrecv(s, 0, 40, "x", 1, 0, 40, &fst));
            FORKED(sperli_allgather(s, "x", 1, &m));
            FORKED(sperli_alltoall(s, "x", 1, &m));
            FORKED(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_SUM, "abcd", 4, &m));
            FORKED(sperli_split(s, 0, 0, &s2));
            FORKED(sperli_comm_free(s));
            bad += flag != 99 || fst.source != 99 || fst.tag != 99 || fst.len != 99;
        }
        {
            int fr[2];
            uint64_t fl = 99;
            FORKED(sperli_set_on_loss(s, SPERLI_LOSS_RETURN));
            FORKED(sperli_failed(s, fr, 2, &m));
            FORKED(sperli_revoke(s));
            FORKED(sperli_agree(s, &fl));
            FORKED(sperli_shrink(s, &s2));
            FORKED(sperli_grow(s, &s2));
            FORKED(sperli_generation(s, &u));
            FORKED(sperli_slot(s, &i));
            FORKED(sperli_layout(s, fr, 2, &m));
            bad += fl != 99;
        }
        FORKED(sperli_set_silence(s, 1000));
        FORKED(sperli_heartbeat(s));
        FORKED(sperli_use_checkpoints(s, "x"));
        FORKED(sperli_checkpoint(s, "x", 1));
        FORKED(sperli_resume(s, &i, &m));
        FORKED(sperli_result(s, buf, sizeof buf, &m));
        FORKED(sperli_last_error(buf, sizeof buf, &m));
        FORKED(sperli_init(one, &s2));
        FORKED(sperli_init_stdin(&s2));
        FORKED(sperli_finish(s));
        FORKED(sperli_abort(s));
        FORKED(sperli_exit(s, 0, &st));
        FORKED(sperli_exit(SPERLI_NONE, 1, &st));
        FORKED(sperli_rank(12345, NULL)); /* before any other check */
#undef FORKED
        bad += i != 99 || st != 99 || m != 99 || s2 != 77 || op != 99 || u != 99;
        bad += !starts(sperli_strerror(SPERLI_E_FORK), "SPERLI_E_FORK: ");
        _exit(bad ? 10 + (bad > 100 ? 100 : bad) : 0);
    }
    CHECK(pid > 0);
    if (pid > 0) {
        int st = wait_child(pid);
        if (st != 0) fprintf(stderr, "test_sperli.c: the forked child ended with %d, want 0\n", st);
        CHECK(st == 0);
    }
    /* the parent's session is whole: its message is there, once */
    EXPECT(sperli_recv(s, 0, 40, &n), 0);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 6 && memcmp(buf, "parent", 6) == 0);
    EXPECT(sperli_barrier(s), 0);
    EXPECT(sperli_rank(s, &(int){0}), 0);
}

/* want_status is a status's three fields. */
static int is_status(sperli_status st, int src, int tag, size_t len) {
    return st.source == src && st.tag == tag && st.len == len;
}

/* The calls of issue 13 in a job of one rank: wildcards, recv_from,
 * probes, sendrecv, allgather, alltoall, reduce_scatter, split and
 * comm_free, each wrong argument in the order of the header, and the
 * communicator handles where they may and may not go. */
static void test_comms(sperli_t s, const char *ckpt) {
    char buf[256];
    size_t n;
    int i, flag;
    sperli_status st, keep = {77, 77, 77};
    sperli_op op;

    /* wildcards: of the messages that fit, the first to arrive */
    EXPECT(sperli_send(s, 0, 12, "twelve", 6), 0);
    EXPECT(sperli_send(s, 0, 11, "eleven", 6), 0);
    EXPECT(sperli_send(s, 0, 12, "twelve-2", 8), 0);
    EXPECT(sperli_recv(s, SPERLI_ANY_SOURCE, 11, &n), 0);
    CHECK(n == 6 && sperli_result(s, buf, sizeof buf, &n) == 0 && memcmp(buf, "eleven", 6) == 0);
    st = keep;
    EXPECT(sperli_recv_from(s, 0, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 12, 6));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 6 && memcmp(buf, "twelve", 6) == 0);
    EXPECT(sperli_recv_from(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 12, 8));
    /* recv_from: each wrong argument, the first one wins */
    st = keep;
    EXPECT(sperli_recv_from(s, 1, 1, &st), SPERLI_E_RANK);
    EXPECT(sperli_recv_from(s, -2, 1, &st), SPERLI_E_RANK);
    EXPECT(sperli_recv_from(s, 0, -2, &st), SPERLI_E_TAG);
    EXPECT(sperli_recv_from(s, 0, INT_MIN, &st), SPERLI_E_TAG);
    EXPECT(sperli_recv_from(s, 0, 1, NULL), SPERLI_E_NULL);
    EXPECT(sperli_recv_from(s, 5, -5, NULL), SPERLI_E_RANK);
    EXPECT(sperli_recv_from(s, 0, -5, NULL), SPERLI_E_TAG);
    CHECK(starts(last(), "SPERLI_E_TAG: sperli_recv_from: "));
    /* from this rank itself with nothing sent: SPERLI_E_FINISHED, nothing
     * changes, and the next message of the tag is the next receive's */
    EXPECT(sperli_recv_from(s, 0, SPERLI_ANY_TAG, &st), SPERLI_E_FINISHED);
    EXPECT(sperli_recv(s, 0, 13, &n), SPERLI_E_FINISHED);
    /* named as every negative code is, the runtime saying why */
    CHECK(starts(last(), "SPERLI_E_FINISHED: sperli_recv: recv(source 0, tag 13) can never match: it is from this rank itself"));
    CHECK(is_status(st, 77, 77, 77));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 8 && memcmp(buf, "twelve-2", 8) == 0);
    EXPECT(sperli_send(s, 0, 13, "13", 2), 0);
    EXPECT(sperli_recv_from(s, 0, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 13, 2));

    /* start_recv with wildcards, finish_recv_from tells what came */
    EXPECT(sperli_start_recv(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &op), 0);
    EXPECT(sperli_start_recv(s, -2, 1, &op), SPERLI_E_RANK);
    EXPECT(sperli_start_recv(s, 0, -2, &op), SPERLI_E_TAG);
    EXPECT(sperli_send(s, 0, 14, "fourteen", 8), 0);
    st = keep;
    EXPECT(sperli_finish_recv_from(s, op, NULL), SPERLI_E_NULL); /* op stays open */
    EXPECT(sperli_finish_recv_from(s, op + 1, &st), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_recv_from(s, 0, NULL), SPERLI_E_OPERATION); /* op before status */
    CHECK(is_status(st, 77, 77, 77));
    EXPECT(sperli_finish_recv_from(s, op, &st), 0);
    CHECK(is_status(st, 0, 14, 8));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 8 && memcmp(buf, "fourteen", 8) == 0);
    EXPECT(sperli_finish_recv_from(s, op, &st), SPERLI_E_OPERATION);
    sperli_op sop;
    EXPECT(sperli_start_send(s, 0, 15, "x", 1, &sop), 0);
    EXPECT(sperli_finish_recv_from(s, sop, &st), SPERLI_E_OPERATION); /* a send */
    CHECK(strstr(last(), "is not a receive") != NULL);
    EXPECT(sperli_finish_send(s, sop), 0);
    EXPECT(sperli_recv(s, 0, 15, &n), 0);

    /* probe, iprobe: the message stays for the receive; the result too */
    EXPECT(sperli_send(s, 0, 16, "sixteen", 7), 0);
    st = keep;
    EXPECT(sperli_probe(s, 1, 16, &st), SPERLI_E_RANK);
    EXPECT(sperli_probe(s, -2, 16, &st), SPERLI_E_RANK);
    EXPECT(sperli_probe(s, 0, -2, &st), SPERLI_E_TAG);
    EXPECT(sperli_probe(s, 0, 16, NULL), SPERLI_E_NULL);
    CHECK(starts(last(), "SPERLI_E_NULL: sperli_probe: status is NULL"));
    CHECK(is_status(st, 77, 77, 77));
    EXPECT(sperli_probe(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 16, 7));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 1); /* still the receive's */
    flag = 99, st = keep;
    EXPECT(sperli_iprobe(s, 1, 16, &flag, &st), SPERLI_E_RANK);
    EXPECT(sperli_iprobe(s, 0, -2, &flag, &st), SPERLI_E_TAG);
    EXPECT(sperli_iprobe(s, 0, 16, NULL, &st), SPERLI_E_NULL);
    EXPECT(sperli_iprobe(s, 0, 16, &flag, NULL), SPERLI_E_NULL);
    CHECK(flag == 99 && is_status(st, 77, 77, 77));
    EXPECT(sperli_iprobe(s, 0, 17, &flag, &st), 0); /* nothing of tag 17 */
    CHECK(flag == 0 && is_status(st, 77, 77, 77));
    EXPECT(sperli_iprobe(s, 0, 16, &flag, &st), 0);
    CHECK(flag == 1 && is_status(st, 0, 16, 7));
    EXPECT(sperli_recv(s, st.source, st.tag, &n), 0);
    CHECK(n == 7 && sperli_result(s, buf, sizeof buf, &n) == 0 && memcmp(buf, "sixteen", 7) == 0);
    flag = 99;
    EXPECT(sperli_iprobe(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &flag, &st), 0);
    CHECK(flag == 0);
    EXPECT(sperli_probe(s, 0, 16, &st), SPERLI_E_FINISHED); /* from itself, nothing sent */

    /* sendrecv: each wrong argument in the header's order */
    st = keep;
    EXPECT(sperli_sendrecv(s, 1, 1, "ab", 2, 0, 1, &st), SPERLI_E_RANK);
    CHECK(starts(last(), "SPERLI_E_RANK: sperli_sendrecv: dest 1 is outside the job (size 1)"));
    EXPECT(sperli_sendrecv(s, 0, -1, "ab", 2, 0, 1, &st), SPERLI_E_TAG); /* no wildcard to send */
    EXPECT(sperli_sendrecv(s, 0, 1, NULL, 2, 0, 1, &st), SPERLI_E_NULL);
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", (size_t)SPERLI_MAX_MESSAGE + 1, 0, 1, &st), SPERLI_E_LENGTH);
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", SIZE_MAX, 0, 1, &st), SPERLI_E_LENGTH);
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", 2, 1, 1, &st), SPERLI_E_RANK);
    CHECK(starts(last(), "SPERLI_E_RANK: sperli_sendrecv: source 1 is outside the job"));
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", 2, -2, 1, &st), SPERLI_E_RANK);
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", 2, 0, -2, &st), SPERLI_E_TAG);
    EXPECT(sperli_sendrecv(s, 0, 1, "ab", 2, 0, 1, NULL), SPERLI_E_NULL);
    EXPECT(sperli_sendrecv(s, 0, -1, NULL, SIZE_MAX, 9, -9, NULL), SPERLI_E_TAG); /* the first wrong */
    CHECK(is_status(st, 77, 77, 77));
    EXPECT(sperli_sendrecv(s, 0, 18, "ring", 4, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 18, 4));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 4 && memcmp(buf, "ring", 4) == 0);
    char mutable[4] = "abc";
    EXPECT(sperli_sendrecv(s, 0, 19, mutable, 3, 0, 19, &st), 0);
    memcpy(mutable, "XYZ", 3); /* the message to itself was copied */
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 3 && memcmp(buf, "abc", 3) == 0);
    EXPECT(sperli_sendrecv(s, 0, 20, NULL, 0, 0, 20, &st), 0);
    CHECK(is_status(st, 0, 20, 0));

    /* allgather, alltoall, reduce_scatter */
    char big1[1];
    size_t m = 12345;
    EXPECT(sperli_allgather(s, NULL, 3, &m), SPERLI_E_NULL);
    EXPECT(sperli_allgather(s, "abc", 3, NULL), SPERLI_E_NULL);
    EXPECT(sperli_alltoall(s, NULL, 3, &m), SPERLI_E_NULL);
    EXPECT(sperli_alltoall(s, "abc", 3, NULL), SPERLI_E_NULL);
    CHECK(starts(last(), "SPERLI_E_NULL: sperli_alltoall: result_len is NULL"));
    int32_t v[3] = {4, -5, 6}, w[3];
    EXPECT(sperli_reduce_scatter(s, 0, SPERLI_SUM, v, sizeof v, &m), SPERLI_E_TYPE);
    EXPECT(sperli_reduce_scatter(s, 8, SPERLI_SUM, v, sizeof v, &m), SPERLI_E_TYPE);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, 0, v, sizeof v, &m), SPERLI_E_OP);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, 11, v, sizeof v, &m), SPERLI_E_OP);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_SUM, NULL, 4, &m), SPERLI_E_NULL);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_SUM, v, 4, NULL), SPERLI_E_NULL);
    EXPECT(sperli_reduce_scatter(s, 0, 0, NULL, 4, NULL), SPERLI_E_TYPE);
    CHECK(starts(last(), "SPERLI_E_TYPE: sperli_reduce_scatter: element type 0"));
    CHECK(m == 12345);
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 0); /* sendrecv's empty message */
    /* wrong calls every rank sees: H1618, an empty result */
    EXPECT(sperli_allgather(s, big1, (size_t)SPERLI_MAX_COLLECTIVE + 1, &m), SPERLI_H1618);
    EXPECT(sperli_allgather(s, big1, SIZE_MAX, &m), SPERLI_H1618);
    EXPECT(sperli_alltoall(s, big1, SIZE_MAX, &m), SPERLI_H1618);
    EXPECT(sperli_reduce_scatter(s, SPERLI_FLOAT64, SPERLI_BAND, v, 8, &m), SPERLI_H1618);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_SUM, v, 6, &m), SPERLI_H1618);
    CHECK(strstr(last(), "no whole number") != NULL || strstr(last(), "equal blocks") != NULL);
    EXPECT(sperli_reduce_scatter(s, SPERLI_BYTES, SPERLI_SUM, v, 4, &m), SPERLI_H1618);
    EXPECT(sperli_reduce_scatter(s, SPERLI_BYTES, SPERLI_BOR, big1, SIZE_MAX, &m), SPERLI_H1618);
    CHECK(m == 0);
    /* the right calls */
    EXPECT(sperli_allgather(s, "abc", 3, &m), 0);
    CHECK(m == 3 && sperli_result(s, buf, sizeof buf, &n) == 0 && memcmp(buf, "abc", 3) == 0);
    EXPECT(sperli_alltoall(s, "wxyz", 4, &m), 0);
    CHECK(m == 4 && sperli_result(s, buf, sizeof buf, &n) == 0 && memcmp(buf, "wxyz", 4) == 0);
    EXPECT(sperli_reduce_scatter(s, SPERLI_INT32, SPERLI_LOR, v, sizeof v, &m), 0);
    CHECK(m == 12 && sperli_result(s, w, sizeof w, &n) == 0 && w[0] == 1 && w[1] == 1 && w[2] == 1);
    EXPECT(sperli_allgather(s, NULL, 0, &m), 0);
    CHECK(m == 0);

    /* split: its arguments, then communicators of one rank */
    sperli_t sub = 77, none = 77, sub2 = 77, nested = 77;
    EXPECT(sperli_split(s, 0, 0, NULL), SPERLI_E_NULL);
    CHECK(starts(last(), "SPERLI_E_NULL: sperli_split: newcomm is NULL"));
    EXPECT(sperli_split(s, -2, 0, &sub), SPERLI_H1618);
    CHECK(starts(last(), "H1618: split: color -2"));
    EXPECT(sperli_split(s, INT_MIN, 0, &sub), SPERLI_H1618);
    CHECK(sub == 77);
    EXPECT(sperli_split(s, SPERLI_UNDEFINED, 0, &none), 0);
    CHECK(none == SPERLI_NONE);
    EXPECT(sperli_split(s, 3, INT_MIN, &sub), 0);
    EXPECT(sperli_split(s, INT_MAX, INT_MAX, &sub2), 0);
    CHECK(sub > s && sub2 > sub);
    EXPECT(sperli_split(sub, 0, 0, &nested), 0);
    CHECK(nested > sub2);
    int r = -1, z = -1;
    EXPECT(sperli_rank(sub, &r), 0);
    EXPECT(sperli_size(sub, &z), 0);
    CHECK(r == 0 && z == 1);
    EXPECT(sperli_job(sub, buf, sizeof buf), 0);
    CHECK(strlen(buf) == SPERLI_JOB_ID_LEN);
    uint32_t inc = 99;
    EXPECT(sperli_incarnation(nested, &inc), 0);
    CHECK(inc == 0);
    EXPECT(sperli_heartbeat(sub), 0);
    EXPECT(sperli_set_silence(sub2, 5000), 0);
    EXPECT(sperli_set_silence(sub2, 5), SPERLI_E_COUNT);
    /* the communicators' messages never meet: the same tag on each */
    EXPECT(sperli_send(s, 0, 21, "world", 5), 0);
    EXPECT(sperli_send(sub, 0, 21, "sub", 3), 0);
    EXPECT(sperli_send(nested, 0, 21, "nested", 6), 0);
    EXPECT(sperli_recv(sub2, 0, 21, &n), SPERLI_E_FINISHED); /* none on sub2 */
    EXPECT(sperli_recv_from(nested, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, &st), 0);
    CHECK(is_status(st, 0, 21, 6));
    EXPECT(sperli_recv(sub, 0, 21, &n), 0);
    CHECK(n == 3 && sperli_result(nested, buf, sizeof buf, &n) == 0 && memcmp(buf, "sub", 3) == 0);
    EXPECT(sperli_recv(s, 0, 21, &n), 0);
    CHECK(n == 5 && sperli_result(sub2, buf, sizeof buf, &n) == 0 && memcmp(buf, "world", 5) == 0);
    EXPECT(sperli_send(sub, 1, 1, "x", 1), SPERLI_E_RANK);
    CHECK(starts(last(), "SPERLI_E_RANK: sperli_send: rank 1 is outside the communicator (size 1)"));
    EXPECT(sperli_barrier(sub), 0);
    EXPECT(sperli_allreduce(sub2, SPERLI_INT32, SPERLI_MAX, v, sizeof v, &m), 0);
    CHECK(m == 12 && sperli_result(sub, w, sizeof w, &n) == 0 && w[1] == -5);
    EXPECT(sperli_bcast(nested, 1, NULL, 0, &m), SPERLI_H1618); /* root outside it */
    EXPECT(sperli_sendrecv(sub, 0, 22, "sr", 2, 0, 22, &st), 0);
    CHECK(is_status(st, 0, 22, 2));

    /* a communicator made by split where the session is wanted */
    int stx = 99;
    EXPECT(sperli_finish(sub), SPERLI_E_COMM);
    CHECK(starts(last(), "SPERLI_E_COMM: sperli_finish: communicator "));
    EXPECT(sperli_abort(sub), SPERLI_E_COMM);
    EXPECT(sperli_exit(sub, 0, &stx), SPERLI_E_COMM);
    EXPECT(sperli_exit(nested, 0, NULL), SPERLI_E_COMM); /* the handle first */
    EXPECT(sperli_use_checkpoints(sub, ckpt), SPERLI_E_COMM);
    EXPECT(sperli_checkpoint(sub2, "x", 1), SPERLI_E_COMM);
    EXPECT(sperli_resume(nested, &i, &n), SPERLI_E_COMM);
    CHECK(stx == 99);
    /* the session is no communicator to free; made-up handles are none */
    EXPECT(sperli_comm_free(s), SPERLI_E_COMM);
    CHECK(starts(last(), "SPERLI_E_COMM: sperli_comm_free: "));
    EXPECT(sperli_comm_free(nested + 1), SPERLI_E_HANDLE);
    EXPECT(sperli_comm_free(SPERLI_NONE), SPERLI_E_HANDLE);
    EXPECT(sperli_rank(nested + 1, &i), SPERLI_E_HANDLE);

    /* an operation of a communicator outlives it */
    sperli_op rop;
    EXPECT(sperli_start_recv(sub, 0, 23, &rop), 0);
    EXPECT(sperli_start_send(sub, 0, 23, "late", 4, &sop), 0);
    EXPECT(sperli_comm_free(sub), 0);
    EXPECT(sperli_comm_free(sub), SPERLI_E_COMM);
    CHECK(starts(last(), "SPERLI_E_COMM: sperli_comm_free: communicator "));
    every_function_refuses(sub, SPERLI_E_COMM);
    EXPECT(sperli_finish_recv(sub, rop, &n), SPERLI_E_COMM);
    EXPECT(sperli_finish_send(nested, sop), 0); /* nested (of sub) lives on */
    EXPECT(sperli_finish_recv_from(s, rop, &st), 0);
    CHECK(is_status(st, 0, 23, 4));
    CHECK(sperli_result(s, buf, sizeof buf, &n) == 0 && n == 4 && memcmp(buf, "late", 4) == 0);
    EXPECT(sperli_barrier(nested), 0);
    EXPECT(sperli_comm_free(nested), 0);
    EXPECT(sperli_barrier(sub2), 0);
    /* sub2 stays open: the session's end ends it (test_session checks) */
    EXPECT(sperli_rank(sub2, &i), 0);
}

/* test_losses: the calls of SPEC §10.3 and §10.4 in a job of one rank
 * (nothing is lost in it), each wrong argument against the table, and that
 * a refused call changed nothing. */
static void test_losses(sperli_t s) {
    sperli_t sub = 0, nc = 77;
    int ranks[4] = {77, 77, 77, 77}, i = 77;
    size_t n = 77;
    uint32_t gen = 77;
    uint64_t flag = 77;
    EXPECT(sperli_split(s, 0, 0, &sub), 0);

    /* set_on_loss: the mode */
    EXPECT(sperli_set_on_loss(s, 2), SPERLI_E_MODE);
    CHECK(starts(last(), "SPERLI_E_MODE: sperli_set_on_loss: mode 2 is neither"));
    EXPECT(sperli_set_on_loss(s, -1), SPERLI_E_MODE);
    EXPECT(sperli_set_on_loss(sub, INT_MIN), SPERLI_E_MODE);
    EXPECT(sperli_set_on_loss(s, INT_MAX), SPERLI_E_MODE);

    /* shrink and grow: the session only, newcomm, then the mode */
    EXPECT(sperli_shrink(sub, &nc), SPERLI_E_COMM);
    CHECK(starts(last(), "SPERLI_E_COMM: sperli_shrink: communicator "));
    EXPECT(sperli_grow(sub, NULL), SPERLI_E_COMM);
    EXPECT(sperli_shrink(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_grow(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_shrink(s, &nc), SPERLI_E_MODE);
    CHECK(starts(last(), "SPERLI_E_MODE: sperli_shrink: the job recovers its losses itself"));
    EXPECT(sperli_grow(s, &nc), SPERLI_E_MODE);
    CHECK(nc == 77);

    /* failed: n, ranks with a capacity; nothing lost here */
    EXPECT(sperli_failed(s, ranks, 4, NULL), SPERLI_E_NULL);
    EXPECT(sperli_failed(s, NULL, 1, &n), SPERLI_E_NULL);
    CHECK(n == 77);
    EXPECT(sperli_failed(s, NULL, 0, &n), 0);
    CHECK(n == 0);
    n = 77;
    EXPECT(sperli_failed(sub, ranks, SIZE_MAX, &n), 0);
    CHECK(n == 0 && ranks[0] == 77);

    /* layout: the slot of rank 0 is 0 */
    n = 77;
    EXPECT(sperli_layout(s, ranks, 4, NULL), SPERLI_E_NULL);
    EXPECT(sperli_layout(s, NULL, 4, &n), SPERLI_E_NULL);
    CHECK(n == 77);
    EXPECT(sperli_layout(s, NULL, 0, &n), SPERLI_E_LENGTH);
    CHECK(n == 1 && starts(last(), "SPERLI_E_LENGTH: sperli_layout: room for 0 slots, there are 1"));
    n = 77;
    EXPECT(sperli_layout(sub, ranks, SIZE_MAX, &n), 0);
    CHECK(n == 1 && ranks[0] == 0 && ranks[1] == 77);

    /* generation and slot */
    EXPECT(sperli_generation(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_slot(sub, NULL), SPERLI_E_NULL);
    EXPECT(sperli_generation(sub, &gen), 0);
    EXPECT(sperli_slot(s, &i), 0);
    CHECK(gen == 0 && i == 0);

    /* agree: the AND of one rank's flag is the flag */
    EXPECT(sperli_agree(s, NULL), SPERLI_E_NULL);
    flag = 0xf0f0f0f0f0f0f0f0ULL;
    EXPECT(sperli_agree(s, &flag), 0);
    CHECK(flag == 0xf0f0f0f0f0f0f0f0ULL);
    flag = UINT64_MAX;
    EXPECT(sperli_agree(sub, &flag), 0);
    CHECK(flag == UINT64_MAX);

    /* LOSS_RETURN: shrink and grow with nothing lost keep the world */
    EXPECT(sperli_set_on_loss(s, SPERLI_LOSS_RETURN), 0);
    EXPECT(sperli_shrink(s, &nc), 0);
    CHECK(nc == s);
    nc = 77;
    EXPECT(sperli_grow(s, &nc), 0);
    CHECK(nc == s);
    EXPECT(sperli_rank(sub, &i), 0); /* the same world: sub lives on */
    EXPECT(sperli_barrier(s), 0);

    /* revoke: the communicator's calls answer 1626, but failed and agree */
    EXPECT(sperli_revoke(sub), 0);
    EXPECT(sperli_revoke(sub), 0);
    EXPECT(sperli_barrier(sub), SPERLI_H1626);
    EXPECT(sperli_send(sub, 0, 1, "x", 1), SPERLI_H1626);
    flag = 6;
    EXPECT(sperli_agree(sub, &flag), 0);
    CHECK(flag == 6);
    EXPECT(sperli_failed(sub, ranks, 4, &n), 0);
    CHECK(n == 0);
    EXPECT(sperli_barrier(s), 0); /* the job's communicator is not revoked */
    EXPECT(sperli_comm_free(sub), SPERLI_H1626); /* freed all the same */
    EXPECT(sperli_comm_free(sub), SPERLI_E_COMM);
    EXPECT(sperli_set_on_loss(s, SPERLI_LOSS_RECOVER), 0);
    EXPECT(sperli_shrink(s, &nc), SPERLI_E_MODE);
}

/* Work queues on a job of one rank: every argument checked, then a queue
 * run to its end. */
static void test_work(sperli_t s) {
    const char *text[3] = {"a", "bb", ""};
    const void *items[3] = {text[0], text[1], NULL};
    size_t lens[3] = {1, 2, 0}, len = 77;
    sperli_work wq = 77;
    int64_t id = 77;
    char name[300];
    memset(name, 'q', sizeof name - 1);
    name[sizeof name - 1] = 0;

    EXPECT(sperli_work_start(s, NULL, items, lens, 3, &wq), SPERLI_E_NULL);
    EXPECT(sperli_work_start(s, "q", NULL, lens, 3, &wq), SPERLI_E_NULL);
    EXPECT(sperli_work_start(s, "q", items, NULL, 3, &wq), SPERLI_E_NULL);
    EXPECT(sperli_work_start(s, name, items, lens, 3, &wq), SPERLI_E_LENGTH);
    CHECK(starts(last(), "SPERLI_E_LENGTH: sperli_work_start: name is longer than 255 bytes"));
    EXPECT(sperli_work_start(s, "q", items, lens, 0, &wq), SPERLI_E_COUNT);
    EXPECT(sperli_work_start(s, "q", items, lens, (size_t)SPERLI_MAX_WORK_ITEMS + 1, &wq), SPERLI_E_COUNT);
    lens[2] = 5; /* items[2] is NULL */
    EXPECT(sperli_work_start(s, "q", items, lens, 3, &wq), SPERLI_E_NULL);
    CHECK(starts(last(), "SPERLI_E_NULL: sperli_work_start: items[2] is NULL with a length of 5 bytes"));
    lens[2] = (size_t)SPERLI_MAX_MESSAGE + 1;
    items[2] = text[2];
    EXPECT(sperli_work_start(s, "q", items, lens, 3, &wq), SPERLI_E_LENGTH);
    lens[2] = 0;
    EXPECT(sperli_work_start(s, "q", items, lens, 3, NULL), SPERLI_E_NULL);
    CHECK(wq == 77);
    EXPECT(sperli_work_next(77, &id, &len), SPERLI_E_HANDLE);
    EXPECT(sperli_work_done(77, 0, "x", 1), SPERLI_E_HANDLE);
    EXPECT(sperli_work_stats(77, NULL), SPERLI_E_HANDLE);

    EXPECT(sperli_work_start(s, "q", items, lens, 3, &wq), 0);
    EXPECT(sperli_work_next(wq, NULL, &len), SPERLI_E_NULL);
    EXPECT(sperli_work_next(wq, &id, NULL), SPERLI_E_NULL);
    EXPECT(sperli_work_done(wq, 0, "x", 1), SPERLI_E_OPERATION); /* holds nothing */
    int done = 0;
    for (;;) {
        EXPECT(sperli_work_next(wq, &id, &len), 0);
        if (id < 0) break;
        CHECK(id >= 0 && id < 3 && len == lens[id]);
        EXPECT(sperli_work_next(wq, &id, &len), SPERLI_E_OPERATION);
        EXPECT(sperli_work_done(wq, id + 1, "r", 1), SPERLI_E_OPERATION);
        EXPECT(sperli_work_done(wq, id, NULL, 1), SPERLI_E_NULL);
        EXPECT(sperli_work_done(wq, id, "r", (size_t)SPERLI_MAX_WORK_RESULT + 1), SPERLI_E_LENGTH);
        EXPECT(sperli_work_result(wq, id, &len), SPERLI_E_OPERATION); /* not ended */
        char r[8];
        int k = snprintf(r, sizeof r, "r%d", (int)id);
        EXPECT(sperli_work_done(wq, id, r, (size_t)k), 0);
        done++;
    }
    CHECK(done == 3 && len == 0);
    EXPECT(sperli_work_next(wq, &id, &len), 0); /* ended: -1 again */
    CHECK(id == -1);
    EXPECT(sperli_work_result(wq, 3, &len), SPERLI_E_COUNT);
    EXPECT(sperli_work_result(wq, 1, NULL), SPERLI_E_NULL);
    EXPECT(sperli_work_result(wq, 1, &len), 0);
    char got[8] = {0};
    EXPECT(sperli_result(s, got, sizeof got, &len), 0);
    CHECK(len == 2 && memcmp(got, "r1", 2) == 0);
    sperli_work_statistics st;
    EXPECT(sperli_work_stats(wq, NULL), SPERLI_E_NULL);
    EXPECT(sperli_work_stats(wq, &st), 0);
    CHECK(st.items == 3 && st.published == 3 && st.executed == 3 && st.duplicates == 0 && st.generations == 1);
}

static void test_session(const char *one, const char *ckpt, sperli_t *kept) {
    sperli_t s = 0, s2 = 77, kept_sub = 0;
    size_t n;
    int i;
    char buf[256];
    EXPECT(sperli_init(one, &s), 0);
    CHECK(s > 0);
    *kept = s;
    /* one session per process */
    EXPECT(sperli_init(one, &s2), SPERLI_E_SESSION);
    EXPECT(sperli_init_stdin(&s2), SPERLI_E_SESSION);
    CHECK(s2 == 77);
    CHECK(starts(last(), "SPERLI_E_SESSION: sperli_init_stdin: "));
    every_function_refuses(s + 1, SPERLI_E_HANDLE);
    every_function_refuses(-s, SPERLI_E_HANDLE);
    EXPECT(sperli_exit(s + 1, 0, NULL), SPERLI_E_HANDLE);
    EXPECT(sperli_exit(SPERLI_NONE, 0, NULL), SPERLI_E_HANDLE); /* a session is open */
    EXPECT(sperli_exit(s, 0, NULL), SPERLI_E_NULL);

    /* rank, size, job, incarnation */
    int rank = -1, size = -1;
    uint32_t inc = 99;
    EXPECT(sperli_rank(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_size(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_incarnation(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_job(s, NULL, 33), SPERLI_E_NULL);
    strcpy(buf, "untouched");
    EXPECT(sperli_job(s, buf, 32), SPERLI_E_LENGTH);
    EXPECT(sperli_job(s, buf, 0), SPERLI_E_LENGTH);
    CHECK(strcmp(buf, "untouched") == 0);
    EXPECT(sperli_rank(s, &rank), 0);
    EXPECT(sperli_size(s, &size), 0);
    EXPECT(sperli_incarnation(s, &inc), 0);
    EXPECT(sperli_job(s, buf, 33), 0);
    CHECK(rank == 0 && size == 1 && inc == 0);
    CHECK(strlen(buf) == 32 && strspn(buf, "0123456789abcdef") == 32);
    CHECK(strstr(one, buf) != NULL);

    /* send: each wrong argument, in the order of the header */
    const char *hello = "hello";
    EXPECT(sperli_send(s, 1, 1, hello, 5), SPERLI_E_RANK);
    CHECK(starts(last(), "SPERLI_E_RANK: sperli_send: rank 1 is outside the job (size 1)"));
    EXPECT(sperli_send(s, -1, 1, hello, 5), SPERLI_E_RANK);
    EXPECT(sperli_send(s, INT_MAX, 1, hello, 5), SPERLI_E_RANK);
    EXPECT(sperli_send(s, INT_MIN, 1, hello, 5), SPERLI_E_RANK);
    EXPECT(sperli_send(s, 0, -1, hello, 5), SPERLI_E_TAG);
    EXPECT(sperli_send(s, 0, INT_MIN, hello, 5), SPERLI_E_TAG);
    EXPECT(sperli_send(s, 0, 1, NULL, 5), SPERLI_E_NULL);
    EXPECT(sperli_send(s, 0, 1, hello, (size_t)SPERLI_MAX_MESSAGE + 1), SPERLI_E_LENGTH);
    EXPECT(sperli_send(s, 0, 1, hello, SIZE_MAX), SPERLI_E_LENGTH);
    EXPECT(sperli_send(s, 7, -1, NULL, SIZE_MAX), SPERLI_E_RANK); /* the first wrong one */
    EXPECT(sperli_send(s, 0, -1, NULL, SIZE_MAX), SPERLI_E_TAG);
    EXPECT(sperli_send(s, 0, 0, NULL, SIZE_MAX), SPERLI_E_NULL);

    /* recv */
    size_t keep = 12345;
    EXPECT(sperli_recv(s, 1, 1, &keep), SPERLI_E_RANK);
    EXPECT(sperli_recv(s, -5, 1, &keep), SPERLI_E_RANK);
    EXPECT(sperli_recv(s, 0, -2, &keep), SPERLI_E_TAG); /* -1 is SPERLI_ANY_TAG */
    CHECK(starts(last(), "SPERLI_E_TAG: sperli_recv: tag -2 is outside 0 to 2147483647 and not SPERLI_ANY_TAG (-1)"));
    EXPECT(sperli_recv(s, 0, INT_MIN, &keep), SPERLI_E_TAG);
    EXPECT(sperli_recv(s, -2, 1, &keep), SPERLI_E_RANK); /* -1 is SPERLI_ANY_SOURCE */
    CHECK(starts(last(), "SPERLI_E_RANK: sperli_recv: rank -2 is outside the job (size 1) and not SPERLI_ANY_SOURCE (-1)"));
    EXPECT(sperli_recv(s, INT_MIN, SPERLI_ANY_TAG, &keep), SPERLI_E_RANK);
    EXPECT(sperli_recv(s, 0, 1, NULL), SPERLI_E_NULL);
    EXPECT(sperli_recv(s, SPERLI_ANY_SOURCE, SPERLI_ANY_TAG, NULL), SPERLI_E_NULL);
    CHECK(keep == 12345);

    /* messages to this rank itself; the wrong calls between changed nothing */
    EXPECT(sperli_send(s, 0, 1, "a", 1), 0);
    EXPECT(sperli_send(s, 0, 1, "a", (size_t)SPERLI_MAX_MESSAGE + 1), SPERLI_E_LENGTH);
    EXPECT(sperli_send(s, 0, 2, hello, 5), 0);
    EXPECT(sperli_send(s, 0, 1, NULL, 0), 0); /* an empty message */
    EXPECT(sperli_send(s, 0, SPERLI_MAX_TAG, "max", 3), 0);
    EXPECT(sperli_recv(s, 0, 1, &n), 0);
    CHECK(n == 1);
    EXPECT(sperli_recv(s, 0, 1, &n), 0);
    CHECK(n == 0);
    EXPECT(sperli_recv(s, 0, SPERLI_MAX_TAG, &n), 0);
    CHECK(n == 3);
    EXPECT(sperli_recv(s, 0, 2, &n), 0);
    CHECK(n == 5);

    /* result: short buffers tell the length and keep the result */
    memset(buf, 0, sizeof buf);
    n = 0;
    EXPECT(sperli_result(s, buf, 4, &n), SPERLI_E_LENGTH);
    CHECK(n == 5 && buf[0] == 0);
    CHECK(starts(last(), "SPERLI_E_LENGTH: sperli_result: buffer of 4 bytes, the result is 5"));
    n = 0;
    EXPECT(sperli_result(s, NULL, 0, &n), SPERLI_E_LENGTH);
    CHECK(n == 5);
    EXPECT(sperli_result(s, NULL, 4, &n), SPERLI_E_NULL);
    EXPECT(sperli_result(s, buf, sizeof buf, NULL), SPERLI_E_NULL);
    EXPECT(sperli_result(s, buf, 5, &n), 0);
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0);
    memset(buf, 0, sizeof buf);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0); /* it stays */
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0);
    /* a refused call that makes data leaves the result */
    EXPECT(sperli_recv(s, 9, 2, &n), SPERLI_E_RANK);
    EXPECT(sperli_reduce(s, 0, 0, SPERLI_SUM, buf, 8, &n), SPERLI_E_TYPE);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0);

    /* open operations */
    sperli_op sop = 0, rop = 0, op = 4242;
    EXPECT(sperli_start_send(s, 1, 3, hello, 5, &op), SPERLI_E_RANK);
    EXPECT(sperli_start_send(s, 0, -3, hello, 5, &op), SPERLI_E_TAG);
    EXPECT(sperli_start_send(s, 0, 3, NULL, 5, &op), SPERLI_E_NULL);
    EXPECT(sperli_start_send(s, 0, 3, hello, (size_t)SPERLI_MAX_MESSAGE + 1, &op), SPERLI_E_LENGTH);
    EXPECT(sperli_start_send(s, 0, 3, hello, 5, NULL), SPERLI_E_NULL);
    EXPECT(sperli_start_recv(s, 1, 3, &op), SPERLI_E_RANK);
    EXPECT(sperli_start_recv(s, 0, -3, &op), SPERLI_E_TAG);
    EXPECT(sperli_start_recv(s, 0, 3, NULL), SPERLI_E_NULL);
    CHECK(op == 4242);
    EXPECT(sperli_start_recv(s, 0, 3, &rop), 0);
    char mutable[6] = "world";
    EXPECT(sperli_start_send(s, 0, 3, mutable, 5, &sop), 0);
    memcpy(mutable, "XXXXX", 5); /* start_send copied */
    CHECK(sop > 0 && rop > 0 && sop != rop);
    /* finish with open operations: refused, nothing done */
    EXPECT(sperli_finish(s), SPERLI_E_OPEN);
    CHECK(starts(last(), "SPERLI_E_OPEN: sperli_finish: 2 operation(s) still open"));
    EXPECT(sperli_rank(s, &i), 0);
    /* wrong kinds, made-up handles */
    EXPECT(sperli_finish_send(s, rop), SPERLI_E_OPERATION);
    CHECK(strstr(last(), "is not a send") != NULL);
    EXPECT(sperli_finish_recv(s, sop, &n), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, 0), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, -1), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, 12345), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, ((sperli_op)1 << 32) | 1), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, sop + 1), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, sop + ((sperli_op)1 << 32)), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, INT64_MAX), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_send(s, INT64_MIN), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_recv(s, 77, &n), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_recv(s, rop, NULL), SPERLI_E_NULL); /* rop stays open */
    /* a checkpoint with an open operation is H1624 (every rank), nothing written */
    EXPECT(sperli_use_checkpoints(s, ckpt), 0);
    EXPECT(sperli_checkpoint(s, "x", 1), SPERLI_H1624);
    CHECK(starts(last(), "H1624: "));
    /* now the right calls */
    EXPECT(sperli_finish_send(s, sop), 0);
    EXPECT(sperli_finish_send(s, sop), SPERLI_E_OPERATION); /* exactly once */
    CHECK(starts(last(), "SPERLI_E_OPERATION: sperli_finish_send: "));
    EXPECT(sperli_finish_recv(s, rop, &n), 0);
    CHECK(n == 5);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 5 && memcmp(buf, "world", 5) == 0);
    EXPECT(sperli_finish_recv(s, rop, &n), SPERLI_E_OPERATION);
    /* many at once: slots are reused, handles are not */
    sperli_op ops[100];
    for (int k = 0; k < 100; k++) EXPECT(sperli_start_send(s, 0, 9, &k, sizeof k, &ops[k]), 0);
    for (int k = 0; k < 100; k++) EXPECT(sperli_finish_send(s, ops[k]), 0);
    for (int k = 0; k < 100; k++) {
        EXPECT(sperli_recv(s, 0, 9, &n), 0);
        int got = -1;
        EXPECT(sperli_result(s, &got, sizeof got, &n), 0);
        CHECK(n == sizeof got && got == k);
    }
    EXPECT(sperli_start_recv(s, 0, 9, &op), 0);
    CHECK(op != ops[0]);
    EXPECT(sperli_finish_send(s, ops[0]), SPERLI_E_OPERATION);
    EXPECT(sperli_finish_recv(s, ops[0], &n), SPERLI_E_OPERATION);
    EXPECT(sperli_send(s, 0, 9, "z", 1), 0);
    EXPECT(sperli_finish_recv(s, op, &n), 0);
    CHECK(n == 1);

    /* collectives in a job of one rank */
    int64_t v[2] = {5, 7}, w[2];
    char big1[1];
    EXPECT(sperli_barrier(s), 0);
    /* types and reductions the header does not know: negative, on this rank */
    EXPECT(sperli_reduce(s, 0, 0, SPERLI_SUM, v, sizeof v, &n), SPERLI_E_TYPE);
    EXPECT(sperli_reduce(s, 0, 8, SPERLI_SUM, v, sizeof v, &n), SPERLI_E_TYPE);
    EXPECT(sperli_reduce(s, 0, -1, SPERLI_SUM, v, sizeof v, &n), SPERLI_E_TYPE);
    EXPECT(sperli_reduce(s, 0, INT_MAX, SPERLI_SUM, v, sizeof v, &n), SPERLI_E_TYPE);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, 0, v, sizeof v, &n), SPERLI_E_OP);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, 11, v, sizeof v, &n), SPERLI_E_OP);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, -2, v, sizeof v, &n), SPERLI_E_OP);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, SPERLI_SUM, NULL, 16, &n), SPERLI_E_NULL);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, SPERLI_SUM, v, 16, NULL), SPERLI_E_NULL);
    EXPECT(sperli_reduce(s, 9, 0, 0, NULL, 16, NULL), SPERLI_E_TYPE); /* first wrong: type */
    EXPECT(sperli_allreduce(s, 99, SPERLI_SUM, v, sizeof v, &n), SPERLI_E_TYPE);
    EXPECT(sperli_allreduce(s, SPERLI_INT64, 99, v, sizeof v, &n), SPERLI_E_OP);
    EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, NULL, 8, &n), SPERLI_E_NULL);
    EXPECT(sperli_allreduce(s, SPERLI_INT64, SPERLI_SUM, v, 8, NULL), SPERLI_E_NULL);
    /* wrong calls every rank sees: H1618, and the job goes on */
    EXPECT(sperli_reduce(s, 1, SPERLI_INT64, SPERLI_SUM, v, sizeof v, &n), SPERLI_H1618);
    CHECK(starts(last(), "H1618: root 1 is outside the job (size 1)"));
    EXPECT(sperli_reduce(s, -1, SPERLI_INT64, SPERLI_SUM, v, sizeof v, &n), SPERLI_H1618);
    EXPECT(sperli_reduce(s, 0, SPERLI_FLOAT64, SPERLI_BAND, v, sizeof v, &n), SPERLI_H1618);
    CHECK(strstr(last(), "does not fit") != NULL);
    EXPECT(sperli_reduce(s, 0, SPERLI_BYTES, SPERLI_SUM, v, sizeof v, &n), SPERLI_H1618);
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, SPERLI_SUM, v, 7, &n), SPERLI_H1618);
    CHECK(strstr(last(), "no whole number") != NULL);
    EXPECT(sperli_allreduce(s, SPERLI_FLOAT32, SPERLI_LXOR, v, 8, &n), SPERLI_H1618);
    EXPECT(sperli_allreduce(s, SPERLI_INT32, SPERLI_SUM, v, 6, &n), SPERLI_H1618);
    /* data over the limit: refused before a byte of it is read */
    EXPECT(sperli_allreduce(s, SPERLI_BYTES, SPERLI_BOR, big1, (size_t)SPERLI_MAX_COLLECTIVE + 1, &n),
           SPERLI_H1618);
    EXPECT(sperli_allreduce(s, SPERLI_BYTES, SPERLI_BOR, big1, SIZE_MAX, &n), SPERLI_H1618);
    EXPECT(sperli_gather(s, 0, big1, SIZE_MAX, &n), SPERLI_H1618);
    EXPECT(sperli_bcast(s, 0, big1, SIZE_MAX, &n), SPERLI_H1618);
    EXPECT(sperli_scatter(s, 0, big1, SIZE_MAX, &n), SPERLI_H1618);
    /* and the right calls after all that */
    EXPECT(sperli_reduce(s, 0, SPERLI_INT64, SPERLI_SUM, v, sizeof v, &n), 0);
    CHECK(n == 16);
    EXPECT(sperli_result(s, w, sizeof w, &n), 0);
    CHECK(w[0] == 5 && w[1] == 7);
    int32_t t[3] = {0, 5, -3}, u[3];
    EXPECT(sperli_allreduce(s, SPERLI_INT32, SPERLI_LAND, t, sizeof t, &n), 0);
    EXPECT(sperli_result(s, u, sizeof u, &n), 0);
    CHECK(n == 12 && u[0] == 0 && u[1] == 1 && u[2] == 1);
    /* bcast: root's data; a root outside the job is H1618 whatever the data */
    EXPECT(sperli_bcast(s, 0, NULL, 3, &n), SPERLI_E_NULL);
    EXPECT(sperli_bcast(s, 0, "xyz", 3, NULL), SPERLI_E_NULL);
    EXPECT(sperli_bcast(s, 1, "xyz", 3, &n), SPERLI_H1618);
    EXPECT(sperli_bcast(s, 5, NULL, 3, &n), SPERLI_H1618); /* no root here: data ignored */
    EXPECT(sperli_bcast(s, INT_MIN, NULL, 0, &n), SPERLI_H1618);
    EXPECT(sperli_bcast(s, 0, "xyz", 3, &n), 0);
    CHECK(n == 3);
    EXPECT(sperli_bcast(s, 0, NULL, 0, &n), 0);
    CHECK(n == 0);
    /* gather, scatter */
    EXPECT(sperli_gather(s, 0, NULL, 2, &n), SPERLI_E_NULL);
    EXPECT(sperli_gather(s, 0, "ab", 2, NULL), SPERLI_E_NULL);
    EXPECT(sperli_gather(s, 2, "ab", 2, &n), SPERLI_H1618);
    EXPECT(sperli_gather(s, 0, "ab", 2, &n), 0);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 2 && memcmp(buf, "ab", 2) == 0);
    EXPECT(sperli_scatter(s, 0, NULL, 3, &n), SPERLI_E_NULL);
    EXPECT(sperli_scatter(s, 0, "abc", 3, NULL), SPERLI_E_NULL);
    EXPECT(sperli_scatter(s, 7, "abc", 3, &n), SPERLI_H1618);
    EXPECT(sperli_scatter(s, 0, "abc", 3, &n), 0);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 3 && memcmp(buf, "abc", 3) == 0);
    /* a collective that answered a code leaves an empty result */
    EXPECT(sperli_scatter(s, 7, "abc", 3, &n), SPERLI_H1618);
    CHECK(n == 0);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 0);
    EXPECT(sperli_barrier(s), 0);

    /* silence, heartbeat */
    EXPECT(sperli_set_silence(s, 99), SPERLI_E_COUNT);
    CHECK(starts(last(), "SPERLI_E_COUNT: sperli_set_silence: 99 ms is outside 100 to 86400000"));
    EXPECT(sperli_set_silence(s, 0), SPERLI_E_COUNT);
    EXPECT(sperli_set_silence(s, -1), SPERLI_E_COUNT);
    EXPECT(sperli_set_silence(s, INT_MIN), SPERLI_E_COUNT);
    EXPECT(sperli_set_silence(s, SPERLI_MAX_SILENCE_MS + 1), SPERLI_E_COUNT);
    EXPECT(sperli_set_silence(s, INT_MAX), SPERLI_E_COUNT);
    EXPECT(sperli_set_silence(s, SPERLI_MIN_SILENCE_MS), 0);
    EXPECT(sperli_set_silence(s, SPERLI_MAX_SILENCE_MS), 0);
    EXPECT(sperli_set_silence(s, 5000), 0);
    EXPECT(sperli_heartbeat(s), 0);

    /* checkpoints */
    char *longpath = malloc(SPERLI_MAX_PATH + 2);
    memset(longpath, 'a', SPERLI_MAX_PATH + 1);
    longpath[SPERLI_MAX_PATH + 1] = 0;
    EXPECT(sperli_use_checkpoints(s, NULL), SPERLI_E_NULL);
    EXPECT(sperli_use_checkpoints(s, longpath), SPERLI_E_PATH);
    CHECK(starts(last(), "SPERLI_E_PATH: sperli_use_checkpoints: "));
    free(longpath);
    EXPECT(sperli_use_checkpoints(s, ""), SPERLI_H1625); /* the job has no --checkpoint-dir */
    snprintf(buf, sizeof buf, "%s/not-a-dir", ckpt);
    FILE *f = fopen(buf, "w");
    if (f) fclose(f);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", buf);
    EXPECT(sperli_use_checkpoints(s, sub), SPERLI_H1625); /* cannot be made */
    EXPECT(sperli_use_checkpoints(s, ckpt), 0);
    EXPECT(sperli_checkpoint(s, NULL, 3), SPERLI_E_NULL);
    EXPECT(sperli_resume(s, NULL, &n), SPERLI_E_NULL);
    EXPECT(sperli_resume(s, &i, NULL), SPERLI_E_NULL);
    i = 7;
    EXPECT(sperli_resume(s, &i, &n), 0); /* a fresh start */
    CHECK(i == 0 && n == 0);
    EXPECT(sperli_checkpoint(s, "state-1", 7), 0);
    EXPECT(sperli_checkpoint(s, "state-2", 7), 0);
    EXPECT(sperli_checkpoint(s, NULL, 0), 0);
    EXPECT(sperli_checkpoint(s, "state-4", 7), 0);
    /* lengths past the limit: refused before anything is sent (item 3) */
    EXPECT(sperli_checkpoint(s, "x", SIZE_MAX), SPERLI_E_LENGTH);
    CHECK(starts(last(), "SPERLI_E_LENGTH: sperli_checkpoint: state is "));
    EXPECT(sperli_checkpoint(s, "x", (size_t)SPERLI_MAX_CHECKPOINT + 1), SPERLI_E_LENGTH);
    EXPECT(sperli_checkpoint(s, "x", (size_t)1 << 63), SPERLI_E_LENGTH);
    EXPECT(sperli_checkpoint(s, NULL, SIZE_MAX), SPERLI_E_NULL); /* state first */
    EXPECT(sperli_resume(s, &i, &n), 0);
    CHECK(i == 1 && n == 7);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 7 && memcmp(buf, "state-4", 7) == 0);

    EXPECT(sperli_split(s, 1, 0, &kept_sub), 0);
    test_comms(s, ckpt);
    test_losses(s);
    test_work(s);
    test_fork(s, one);

    /* the end: every function refuses the finished session, and its
     * communicators */
    EXPECT(sperli_finish(s), 0);
    every_function_refuses(s, SPERLI_E_HANDLE);
    every_function_refuses(kept_sub, SPERLI_E_HANDLE);
    CHECK(starts(last(), "SPERLI_E_HANDLE: "));
    int st = 99;
    EXPECT(sperli_exit(s, 0, &st), SPERLI_E_HANDLE);
    CHECK(st == 99);
}

/* The second session reads its description from standard input, resumes
 * the first session's checkpoint, and aborts. */
static void test_stdin_abort(const char *ckpt, sperli_t first) {
    sperli_t s = 0;
    size_t n;
    int i;
    char buf[64];
    EXPECT(sperli_init_stdin(&s), 0);
    CHECK(s > 0 && s != first);
    /* the rest of standard input is the program's: not a byte of it was
     * taken (issue 16, item 8; a rank started by hand) */
    char rest[256];
    size_t got = 0;
    for (;;) {
        ssize_t k = read(0, rest + got, sizeof rest - 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
        if (got == sizeof rest - 1) break;
    }
    rest[got] = 0;
    CHECK(strcmp(rest, STDIN_REST) == 0);
    EXPECT(sperli_rank(first, &i), SPERLI_E_HANDLE);
    EXPECT(sperli_use_checkpoints(s, ckpt), 0);
    EXPECT(sperli_resume(s, &i, &n), 0);
    CHECK(i == 1 && n == 7);
    EXPECT(sperli_result(s, buf, sizeof buf, &n), 0);
    CHECK(n == 7 && memcmp(buf, "state-4", 7) == 0);
    sperli_op op;
    EXPECT(sperli_start_recv(s, 0, 1, &op), 0);
    EXPECT(sperli_abort(s), 0); /* with an open operation: abort ends it all */
    every_function_refuses(s, SPERLI_E_HANDLE);
    int st = 99;
    EXPECT(sperli_exit(SPERLI_NONE, 0, &st), 0);
    CHECK(st == 1); /* an aborted rank has failed */
    EXPECT(sperli_init_stdin(&s), SPERLI_H1615); /* standard input is at its end now */
}

struct joiner {
    const char *line;
    sperli_t s;
    int rc;
    volatile int done;
};

/* join_thread waits in sperli_init; answered SPERLI_E_BUSY while the main
 * thread's probe holds the library, it tries again. */
static void *join_thread(void *arg) {
    struct joiner *j = arg;
    while ((j->rc = sperli_init(j->line, &j->s)) == SPERLI_E_BUSY) sleep_ms(1);
    j->done = 1;
    return NULL;
}

/* While one thread waits in sperli_init (a job whose rank 1 never comes,
 * with a short join window), every other call is SPERLI_E_BUSY at once and
 * changes nothing. */
static void test_busy(const char *one, const char *two) {
    char *line = with_join_ms(two, 2500);
    struct joiner j = {line, 77, 0, 0};
    pthread_t th;
    size_t n;
    int i;
    char buf[64] = "x";
    sperli_t s3 = 0;
    /* a session to be busy against, so that handles are right */
    EXPECT(sperli_init(one, &s3), 0);
    EXPECT(sperli_finish(s3), 0);
    EXPECT(sperli_rank(s3, &i), SPERLI_E_HANDLE); /* the last error before the busy phase */
    pthread_create(&th, NULL, join_thread, &j);
    int seen = 0;
    for (int k = 0; k < 2000 && !seen && !j.done; k++) {
        if (sperli_rank(s3, &i) == SPERLI_E_BUSY)
            seen = 1;
        else
            sleep_ms(1);
    }
    CHECK(seen);
    if (!seen) {
        pthread_join(th, NULL);
        free(line);
        return;
    }
    sperli_op op = 0;
    int st = 99;
    EXPECT(sperli_init(one, &s3), SPERLI_E_BUSY);
    EXPECT(sperli_init(NULL, NULL), SPERLI_E_BUSY);
    EXPECT(sperli_init_stdin(&s3), SPERLI_E_BUSY);
    EXPECT(sperli_last_error(buf, sizeof buf, &n), SPERLI_E_BUSY);
    EXPECT(sperli_exit(SPERLI_NONE, 0, &st), SPERLI_E_BUSY);
    every_function_refuses(s3, SPERLI_E_BUSY);
    every_function_refuses(1, SPERLI_E_BUSY);
    every_function_refuses(-1, SPERLI_E_BUSY);
    EXPECT(sperli_finish_send(1, op), SPERLI_E_BUSY);
    CHECK(strcmp(sperli_strerror(SPERLI_E_BUSY), "SPERLI_E_BUSY: another call of the library is running") == 0);
    CHECK(st == 99 && !j.done);
    pthread_join(th, NULL);
    EXPECT(j.rc, SPERLI_H1610);
    CHECK(j.s == 77);
    /* the busy answers did not replace the last error */
    CHECK(starts(last(), "H1610: rank 1 at "));
    EXPECT(sperli_exit(SPERLI_NONE, j.rc, &st), 0);
    CHECK(st == 1);
    EXPECT(sperli_exit(SPERLI_NONE, 0, &st), 0);
    CHECK(st == 0);
    free(line);
}

struct cancelled {
    const char *line;
    sperli_t s;
    int rc;
    volatile int returned;
};

/* cancel_thread waits in sperli_init (the join of a job whose rank 1 never
 * comes: init always waits on the library's worker, in wait.c) while the
 * main thread cancels it; the cancellation takes effect at the
 * pthread_testcancel after the call, not inside it. */
static void *cancel_thread(void *arg) {
    struct cancelled *c = arg;
    int rc;
    while ((rc = sperli_init(c->line, &c->s)) == SPERLI_E_BUSY) sched_yield();
    c->rc = rc;
    c->returned = 1;
    pthread_testcancel();
    c->returned = 2; /* not reached */
    return NULL;
}

/* pthread_cancel of a thread that waits in a call: the call runs to its
 * end, the library is free afterwards, and the wait works again (issue 16,
 * item 4). */
static int test_cancel(const char *one, const char *two) {
    char *line = with_join_ms(two, 1500);
    struct cancelled c = {line, 77, 0, 0};
    pthread_t th;
    int i;
    pthread_create(&th, NULL, cancel_thread, &c);
    int seen = 0;
    for (int k = 0; k < 5000 && !seen && !c.returned; k++) {
        if (sperli_rank(1, &i) == SPERLI_E_BUSY)
            seen = 1;
        else
            sleep_ms(1);
    }
    CHECK(seen);
    pthread_cancel(th);
    void *res = NULL;
    pthread_join(th, &res);
    free(line);
    CHECK(res == PTHREAD_CANCELED);
    CHECK(c.returned == 1);
    EXPECT(c.rc, SPERLI_H1610);
    CHECK(c.s == 77);
    /* not busy any more: the flag was let go */
    int rc = sperli_rank(1, &i);
    EXPECT(rc, SPERLI_E_HANDLE);
    if (rc == SPERLI_E_BUSY) return -1; /* the library is stuck: stop here */
    sperli_t s = 0;
    EXPECT(sperli_init(one, &s), 0);
    EXPECT(sperli_barrier(s), 0);
    EXPECT(sperli_finish(s), 0);
    return 0;
}

/* spin_mode: SPERLI_SPIN_US is outside its range in the environment; both
 * inits answer 1616 (issue 16, item 1) and the process goes on. */
static int spin_mode(const char *one) {
    sperli_t s = 77;
    int st = 99;
    char want[128];
    snprintf(want, sizeof want, "H1616: SPERLI_SPIN_US=\"%s\": want whole microseconds",
             getenv("SPERLI_SPIN_US") ? getenv("SPERLI_SPIN_US") : "");
    EXPECT(sperli_init(one, &s), SPERLI_H1616);
    CHECK(starts(last(), want));
    EXPECT(sperli_init_stdin(&s), SPERLI_H1616);
    CHECK(starts(last(), want));
    CHECK(s == 77);
    EXPECT(sperli_exit(SPERLI_NONE, SPERLI_H1616, &st), 0);
    CHECK(st == 1);
    if (failures > 0) {
        fprintf(stderr, "test_sperli spin: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_sperli spin: ok (%d checks)\n", checks);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "spin") == 0) {
        char *one = read_line(argv[2]);
        int rc = spin_mode(one);
        free(one);
        return rc;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: test_sperli ONE.job TWO.job CKPTDIR < ONE.job-and-more\n"
                        "       test_sperli spin ONE.job < ONE.job\n");
        return 2;
    }
    char *one = read_line(argv[1]);
    char *two = read_line(argv[2]);
    sperli_t first = 0;

    test_strerror();
    test_no_session(one);
    test_session(one, argv[3], &first);
    /* a line without its line end works as well */
    one[strcspn(one, "\r\n")] = 0;
    test_stdin_abort(argv[3], first);
    test_busy(one, two);
    if (test_cancel(one, two) != 0) fprintf(stderr, "test_sperli: the library stayed busy after a cancel\n");

    free(one);
    free(two);
    if (failures > 0) {
        fprintf(stderr, "test_sperli: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_sperli: ok (%d checks)\n", checks);
    return 0;
}
