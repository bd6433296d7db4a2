# Test helpers.
#   axonn_add_test(name target [ARGS ...])          one process
#   axonn_add_mpi_test(name target NP 1 2 4 [ARGS ...])   one CTest entry per rank count, real mpiexec
include(GoogleTest)

# Open MPI needs --oversubscribe above the core count (2 here); MPICH's launcher does not take the flag.
if(NOT DEFINED AXONN_MPIEXEC_EXTRA)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
  if(_mpiexec_version MATCHES "Open MPI|OpenRTE|open-mpi")
    set(AXONN_MPIEXEC_EXTRA --oversubscribe CACHE STRING "extra mpiexec flags for tests")
  else()
    set(AXONN_MPIEXEC_EXTRA "" CACHE STRING "extra mpiexec flags for tests")
  endif()
endif()

set(AXONN_TEST_ENV
  "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")

function(axonn_add_test name target)
  cmake_parse_arguments(A "" "" "ARGS" ${ARGN})
  add_test(NAME ${name} COMMAND $<TARGET_FILE:${target}> ${A_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 ENVIRONMENT "${AXONN_TEST_ENV}")
endfunction()

function(axonn_add_mpi_test name target)
  cmake_parse_arguments(A "" "" "NP;ARGS" ${ARGN})
  foreach(np IN LISTS A_NP)
    add_test(NAME ${name}.np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${AXONN_MPIEXEC_EXTRA}
              ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${A_ARGS})
    set_tests_properties(${name}.np${np} PROPERTIES TIMEOUT 300 PROCESSORS ${np} LABELS mpi
      ENVIRONMENT "${AXONN_TEST_ENV};OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
  endforeach()
endfunction()
