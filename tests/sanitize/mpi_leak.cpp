// tests/sanitize/mpi_leak.cpp — the check of the sanitizer check's leak detection in MPI processes
// (scripts/sanitize-check.sh): an MPI program that loses 400 bytes on each rank. Under the settings the MPI
// tests run with (LSan on, keep_loaded.c preloaded, lsan.supp), LeakSanitizer must report this leak on every
// rank, and nothing of Open MPI's: a setup that suppressed everything would pass every MPI test unseen.
#include <mpi.h>

#include <cstdio>

int* volatile sink;  // volatile: the allocation cannot be optimised away

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  sink = new int[100];  // 400 bytes that nothing points to at exit
  sink[0] = rank;
  sink = nullptr;
  double x = rank, sum = 0.0;
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d: sum %g\n", rank, sum);
  MPI_Finalize();
  return 0;
}
