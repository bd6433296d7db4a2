# Findxxhash — xxHash (Debian: libxxhash-dev) ships no CMake package; find its header and library and
# make xxhash::xxhash. Sets xxhash_FOUND, xxhash_INCLUDE_DIR, xxhash_LIBRARY.
find_path(xxhash_INCLUDE_DIR xxhash.h DOC "xxhash.h (Debian: apt-get install libxxhash-dev)")
find_library(xxhash_LIBRARY xxhash DOC "libxxhash (Debian: apt-get install libxxhash-dev)")

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(xxhash REQUIRED_VARS xxhash_LIBRARY xxhash_INCLUDE_DIR)

if(xxhash_FOUND AND NOT TARGET xxhash::xxhash)
  add_library(xxhash::xxhash UNKNOWN IMPORTED)
  set_target_properties(xxhash::xxhash PROPERTIES
    IMPORTED_LOCATION "${xxhash_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${xxhash_INCLUDE_DIR}")
endif()
mark_as_advanced(xxhash_INCLUDE_DIR xxhash_LIBRARY)
