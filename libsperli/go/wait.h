/*
 * wait.h — how a C thread waits for a call the Go layer runs on its worker
 * goroutine (libsperli/go/main.go, "Waiting"). Internal to libsperli: used
 * by wait.c, main.go and libsperli/src/sperli.c.
 */
#ifndef SPERLI_WAIT_H
#define SPERLI_WAIT_H

/* One call in flight: the worker writes rc, then sperligo_wake sets flag. */
typedef struct {
    unsigned flag; /* accessed with __atomic builtins only */
    int rc;
} sperligo_done;

/* sperligo_wait returns d->rc once the call is done: it spins a while
 * (SPERLI_SPIN_US, default 1000 µs, yielding the processor), then sleeps on a
 * condition variable. */
int sperligo_wait(sperligo_done *d);

/* sperligo_wake marks d done and wakes its waiter. */
void sperligo_wake(sperligo_done *d);

/* sperligo_done_here marks d done for a call that ran on the waiting
 * thread itself (SPERLI_WORKER=0): nobody to wake, nothing to yield to. */
void sperligo_done_here(sperligo_done *d);

#endif
