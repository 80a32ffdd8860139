"""The mpi4py side of compare-mpi.sh, timed like mpi_pingpong.c."""
import sys
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
pings = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
msgs = int(sys.argv[2]) if len(sys.argv) > 2 else 32
other = 1 - rank
small = bytearray(64)
big = bytearray(1 << 20)
warm = max(1, pings // 10)
t0 = 0.0
for i in range(warm + pings):
    if i == warm:
        t0 = MPI.Wtime()
    if rank == 0:
        comm.Send(small, dest=other, tag=1)
        comm.Recv(small, source=other, tag=1)
    else:
        comm.Recv(small, source=other, tag=1)
        comm.Send(small, dest=other, tag=1)
rt = (MPI.Wtime() - t0) / pings
comm.Barrier()
t0 = MPI.Wtime()
for i in range(msgs):
    if rank == 0:
        comm.Send(big, dest=other, tag=2)
    else:
        comm.Recv(big, source=other, tag=2)
ack = bytearray(1)
if rank == 0:
    comm.Recv(ack, source=other, tag=3)
else:
    comm.Send(ack, dest=other, tag=3)
st = MPI.Wtime() - t0
if rank == 0:
    print("rt_us=%.2f rate_MBps=%.1f" % (rt * 1e6, msgs * (1 << 20) / st / 1e6))
