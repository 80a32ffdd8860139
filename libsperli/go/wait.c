/*
 * wait.c — the C side of the Go layer's worker (wait.h). A C thread that
 * called into Go is locked to its goroutine; if that goroutine parked in a
 * receive, every message would cost two thread wake-ups (the netpoller's
 * thread, then the locked one). So waiting calls run on an unlocked worker
 * goroutine and the C thread waits here: a short spin catches an answer
 * that comes within a round trip at no wake-up cost at all; a long wait
 * sleeps on a condition variable.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "wait.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long spin_ns = -1;

static long spin_limit(void) {
    if (spin_ns < 0) {
        long us = 1000;
        const char *e = getenv("SPERLI_SPIN_US");
        if (e != NULL && *e != 0) {
            char *end;
            long v = strtol(e, &end, 10);
            if (*end == 0 && v >= 0 && v <= 1000000) us = v;
        }
        spin_ns = us * 1000;
    }
    return spin_ns;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int sperligo_wait(sperligo_done *d) {
    long limit = spin_limit();
    if (limit > 0) {
        long long end = now_ns() + limit;
        for (;;) {
            for (int i = 0; i < 64; i++) {
                if (__atomic_load_n(&d->flag, __ATOMIC_ACQUIRE)) return d->rc;
                relax();
            }
            if (now_ns() >= end) break;
            sched_yield();
        }
    }
    pthread_mutex_lock(&mu);
    while (!__atomic_load_n(&d->flag, __ATOMIC_ACQUIRE)) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return d->rc;
}

void sperligo_wake(sperligo_done *d) {
    pthread_mutex_lock(&mu);
    __atomic_store_n(&d->flag, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* The waiter often shares this processor (the other one runs the peer):
     * let it run now, not after this thread's scheduler has looked for
     * more work. */
    sched_yield();
}

void sperligo_done_here(sperligo_done *d) {
    __atomic_store_n(&d->flag, 1, __ATOMIC_RELEASE);
}
