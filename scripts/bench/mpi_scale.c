/* The Open MPI side of scripts/bench/scale.sh: join (MPI_Init), an
 * allreduce and a barrier, like scripts/bench/scale.star; then each rank's
 * peak resident memory (VmHWM) and open descriptors, reduced to their
 * maxima on rank 0, which prints one line. */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static long vmhwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb;
}

static long fds(void) {
    DIR *d = opendir("/proc/self/fd");
    long n = -1; /* the directory's own */
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n - 2; /* . and .. */
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long mine = rank + 1, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    long m[2] = {vmhwm_kb(), fds()}, mx[2];
    MPI_Reduce(m, mx, 2, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("sum=%ld want=%ld rss_kb=%ld fds=%ld\n", sum, (long)size * (size + 1) / 2, mx[0], mx[1]);
    MPI_Finalize();
    return 0;
}
