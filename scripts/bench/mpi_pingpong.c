/* The Open MPI side of compare-mpi.sh: the 64-byte round trip and the
 * 1 MiB one-way rate between ranks 0 and 1, timed like `sperli bench`.
 *   mpirun -np 2 mpi_pingpong PINGS MESSAGES   */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int pings = argc > 1 ? atoi(argv[1]) : 1000;
    int msgs = argc > 2 ? atoi(argv[2]) : 32;
    int other = 1 - rank;
    static char small[64];
    char *big = calloc(1, 1 << 20);
    char ack = 0;
    int warm = pings / 10 > 0 ? pings / 10 : 1;
    double t0 = 0;
    for (int i = 0; i < warm + pings; i++) {
        if (i == warm) t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(small, 64, MPI_CHAR, other, 1, MPI_COMM_WORLD);
            MPI_Recv(small, 64, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(small, 64, MPI_CHAR, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(small, 64, MPI_CHAR, other, 1, MPI_COMM_WORLD);
        }
    }
    double rt = (MPI_Wtime() - t0) / pings;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < msgs; i++) {
        if (rank == 0) MPI_Send(big, 1 << 20, MPI_CHAR, other, 2, MPI_COMM_WORLD);
        else MPI_Recv(big, 1 << 20, MPI_CHAR, other, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rank == 0) MPI_Recv(&ack, 1, MPI_CHAR, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else MPI_Send(&ack, 1, MPI_CHAR, other, 3, MPI_COMM_WORLD);
    double st = MPI_Wtime() - t0;
    if (rank == 0)
        printf("rt_us=%.2f rate_MBps=%.1f\n", rt * 1e6, (double)msgs * (1 << 20) / st / 1e6);
    free(big);
    MPI_Finalize();
    return 0;
}
