/*
 * mpi_coll: the Open MPI side of scripts/bench/collectives.sh. It times
 * what scripts/bench/collbench times in Sperli ranks:
 *
 *   mpi_coll allreduce ITERS   MPI_Allreduce of 2,000,000 int64 (MPI_SUM)
 *   mpi_coll barrier ITERS     MPI_Barrier
 *
 * Every rank warms up with one call, then all start together after a
 * barrier; rank 0 prints one line:
 *
 *   mpi op=allreduce ranks=3 iters=20 total_s=... per_call_us=...
 *
 * Built with mpicc, run with mpirun over TCP on loopback.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELEMS 2000000

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 3 || (strcmp(argv[1], "allreduce") != 0 && strcmp(argv[1], "barrier") != 0)) {
		if (rank == 0)
			fprintf(stderr, "usage: mpi_coll allreduce|barrier ITERS\n");
		MPI_Finalize();
		return 2;
	}
	int allreduce = strcmp(argv[1], "allreduce") == 0;
	int iters = atoi(argv[2]);
	int64_t *in = NULL, *out = NULL;
	if (allreduce) {
		in = malloc(ELEMS * sizeof *in);
		out = malloc(ELEMS * sizeof *out);
		if (in == NULL || out == NULL) {
			fprintf(stderr, "mpi_coll: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (int64_t i = 0; i < ELEMS; i++)
			in[i] = i + rank;
	}
	/* Warm-up call, then start together. */
	if (allreduce)
		MPI_Allreduce(in, out, ELEMS, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	else
		MPI_Barrier(MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters; i++) {
		if (allreduce)
			MPI_Allreduce(in, out, ELEMS, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
		else
			MPI_Barrier(MPI_COMM_WORLD);
	}
	double t = MPI_Wtime() - t0;
	double slowest;
	MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (allreduce) {
		/* element 1 is sum over ranks of (1 + rank) */
		int64_t want = (int64_t)size + (int64_t)size * (size - 1) / 2;
		if (out[1] != want) {
			fprintf(stderr, "mpi_coll: rank %d: element 1 = %lld, want %lld\n", rank, (long long)out[1], (long long)want);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	if (rank == 0)
		printf("mpi op=%s ranks=%d iters=%d total_s=%.6f per_call_us=%.1f\n", argv[1], size, iters, slowest,
		       slowest / iters * 1e6);
	free(in);
	free(out);
	MPI_Finalize();
	return 0;
}
