/* tests/sanitize/keep_loaded.c — a dlclose that unloads nothing, preloaded (LD_PRELOAD) by
 * scripts/sanitize-check.sh into the processes that initialise MPI. Open MPI unloads its components
 * (mca_*.so) at MPI_Finalize; the allocations they keep until exit then point into unmapped code, which
 * LeakSanitizer reports as "<unknown module>" and no suppression by library can match. With the components
 * still mapped, every such allocation is attributed to Open MPI's libraries (tests/sanitize/lsan.supp),
 * and a leak of ours stays a leak. Built without sanitizers; test code only. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
