/*
 * mpi_coll: the Open MPI side of scripts/bench/collectives.sh. It times
 * what scripts/bench/collbench times in Sperli ranks, the same way:
 *
 *   mpi_coll allreduce ITERS          allreduce of 2,000,000 int64 (sum)
 *   mpi_coll barrier ITERS            barrier
 *   mpi_coll [-target-ms MS] OP:BYTES[:ITERS] ...
 *
 * The second form runs every measurement given, in order, in one job. OP
 * is one of
 *
 *   allreduce-int64    MPI_Allreduce of BYTES/8 int64, MPI_SUM
 *   allreduce-float64  MPI_Allreduce of BYTES/8 double, MPI_SUM
 *   bcast              MPI_Bcast of BYTES from rank 0
 *   allgather          MPI_Allgather of BYTES per rank
 *   alltoall           MPI_Alltoall of BYTES per rank in all (BYTES/size
 *                      to each rank; BYTES is rounded down to a multiple)
 *   barrier            MPI_Barrier (BYTES is ignored, give 0)
 *
 * For each: one warm-up call; then, unless ITERS is given (and not 0), a
 * calibration: the slowest rank's time of one call (of 10 calls when one
 * takes under a fiftieth of the target) sets ITERS to about MS (default
 * 300) milliseconds of calls; then a barrier, ITERS timed calls, and rank 0
 * prints the slowest rank's time:
 *
 *   mpi op=allreduce-int64 bytes=16000000 ranks=3 iters=20 total_s=... per_call_us=...
 *
 * Built with mpicc, run with mpirun over TCP on loopback.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE_INT64, ALLREDUCE_FLOAT64, BCAST, ALLGATHER, ALLTOALL, BARRIER };

static const char *names[] = {"allreduce-int64", "allreduce-float64", "bcast", "allgather", "alltoall", "barrier"};

static int rank, size;

struct meas {
	int op;
	long bytes;
	long iters;
	char *in, *out;
};

static void call(struct meas *m) {
	switch (m->op) {
	case ALLREDUCE_INT64:
		MPI_Allreduce(m->in, m->out, (int)(m->bytes / 8), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		break;
	case ALLREDUCE_FLOAT64:
		MPI_Allreduce(m->in, m->out, (int)(m->bytes / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		break;
	case BCAST:
		MPI_Bcast(m->in, (int)m->bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(m->in, (int)m->bytes, MPI_BYTE, m->out, (int)m->bytes, MPI_BYTE, MPI_COMM_WORLD);
		break;
	case ALLTOALL:
		MPI_Alltoall(m->in, (int)(m->bytes / size), MPI_BYTE, m->out, (int)(m->bytes / size), MPI_BYTE,
		             MPI_COMM_WORLD);
		break;
	default:
		MPI_Barrier(MPI_COMM_WORLD);
	}
}

/* timed: the slowest rank's seconds for k calls, on every rank. */
static double timed(struct meas *m, long k) {
	double t0 = MPI_Wtime();
	for (long i = 0; i < k; i++)
		call(m);
	double t = MPI_Wtime() - t0, slowest;
	MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return slowest;
}

static void check(struct meas *m) {
	long elems = m->bytes / 8;
	if (m->op != ALLREDUCE_INT64 && m->op != ALLREDUCE_FLOAT64)
		return;
	/* element e is the sum over ranks of e + rank */
	long e = elems > 1 ? 1 : 0;
	double want = (double)size * e + (double)size * (size - 1) / 2, got;
	if (m->op == ALLREDUCE_INT64)
		got = (double)((int64_t *)m->out)[e];
	else
		got = ((double *)m->out)[e];
	if (got != want) {
		fprintf(stderr, "mpi_coll: rank %d: %s element %ld = %g, want %g\n", rank, names[m->op], e, got, want);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

static void run(struct meas *m, double target_s) {
	size_t in = m->bytes, out = m->bytes;
	if (m->op == ALLGATHER)
		out = (size_t)m->bytes * size;
	m->in = calloc(in ? in : 1, 1);
	m->out = calloc(out ? out : 1, 1);
	if (m->in == NULL || m->out == NULL) {
		fprintf(stderr, "mpi_coll: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	long elems = m->bytes / 8;
	for (long i = 0; i < elems; i++) {
		if (m->op == ALLREDUCE_INT64)
			((int64_t *)m->in)[i] = i + rank;
		else if (m->op == ALLREDUCE_FLOAT64)
			((double *)m->in)[i] = (double)(i + rank);
	}
	if (m->op != ALLREDUCE_INT64 && m->op != ALLREDUCE_FLOAT64)
		for (long i = 0; i < m->bytes; i++)
			m->in[i] = (char)(i + rank);
	call(m); /* warm-up */
	if (m->iters <= 0) {
		double one = timed(m, 1);
		if (one < target_s / 50)
			one = timed(m, 10) / 10;
		double k = target_s / (one > 1e-9 ? one : 1e-9);
		m->iters = k < 1 ? 1 : k > 1000000 ? 1000000 : (long)(k + 0.5);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	double slowest = timed(m, m->iters);
	check(m);
	if (rank == 0) {
		printf("mpi op=%s bytes=%ld ranks=%d iters=%ld total_s=%.6f per_call_us=%.1f\n", names[m->op], m->bytes,
		       size, m->iters, slowest, slowest / m->iters * 1e6);
		fflush(stdout);
	}
	free(m->in);
	free(m->out);
}

static int usage(void) {
	if (rank == 0)
		fprintf(stderr, "usage: mpi_coll allreduce|barrier ITERS\n"
		                "       mpi_coll [-target-ms MS] OP:BYTES[:ITERS] ...\n"
		                "OP: allreduce-int64 allreduce-float64 bcast allgather alltoall barrier\n");
	MPI_Finalize();
	return 2;
}

/* parse: OP:BYTES[:ITERS] into m; 0 when it is no such thing. */
static int parse(const char *s, struct meas *m) {
	const char *colon = strchr(s, ':');
	if (colon == NULL)
		return 0;
	m->op = -1;
	for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
		if (strlen(names[i]) == (size_t)(colon - s) && strncmp(s, names[i], colon - s) == 0)
			m->op = i;
	if (m->op < 0)
		return 0;
	char *end;
	m->bytes = strtol(colon + 1, &end, 10);
	m->iters = 0;
	if (*end == ':')
		m->iters = strtol(end + 1, &end, 10);
	if (*end != '\0' || m->bytes < 0 || m->bytes > (1L << 30) || m->iters < 0)
		return 0;
	if ((m->op == ALLREDUCE_INT64 || m->op == ALLREDUCE_FLOAT64) && (m->bytes < 8 || m->bytes % 8 != 0))
		return 0;
	if (m->op == ALLTOALL)
		m->bytes -= m->bytes % size;
	if (m->op == BARRIER)
		m->bytes = 0;
	return 1;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	double target_s = 0.3;
	int first = 1;
	if (argc == 3 && (strcmp(argv[1], "allreduce") == 0 || strcmp(argv[1], "barrier") == 0)) {
		struct meas m = {strcmp(argv[1], "allreduce") == 0 ? ALLREDUCE_INT64 : BARRIER, 0, atol(argv[2]), 0, 0};
		if (m.op == ALLREDUCE_INT64)
			m.bytes = 16000000;
		if (m.iters < 1)
			return usage();
		run(&m, target_s);
		MPI_Finalize();
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "-target-ms") == 0) {
		target_s = atof(argv[2]) / 1000;
		first = 3;
	}
	if (first >= argc || target_s <= 0)
		return usage();
	struct meas *ms = calloc(argc, sizeof *ms);
	for (int i = first; i < argc; i++)
		if (!parse(argv[i], &ms[i]))
			return usage();
	for (int i = first; i < argc; i++)
		run(&ms[i], target_s);
	free(ms);
	MPI_Finalize();
	return 0;
}
