# The layering check (docs/ARCHITECTURE.md): a layer includes only its own headers and those of the
# layers it links, directly or through them. The allowed layers are derived at configure time from the
# CMake target links (src/CMakeLists.txt writes them to LAYERS_FILE), so the links stay the one statement
# of the layering and this script makes the build fail on an include that goes around them.
#   cmake -DLAYERS_FILE=<file> -DSOURCE_DIR=<project root> [-DSTAMP=<file>] -P check_layers.cmake
# LAYERS_FILE sets AXONN_LAYERS (the layer names) and AXONN_LAYER_ALLOWED_<layer> for each.
cmake_minimum_required(VERSION 3.25)
include(${LAYERS_FILE})
set(violations "")
foreach(layer IN LISTS AXONN_LAYERS)
  set(allowed ${AXONN_LAYER_ALLOWED_${layer}})
  file(GLOB_RECURSE files LIST_DIRECTORIES false
       ${SOURCE_DIR}/src/${layer}/*.cpp ${SOURCE_DIR}/src/${layer}/*.hpp ${SOURCE_DIR}/src/${layer}/*.cu
       ${SOURCE_DIR}/src/${layer}/*.cuh ${SOURCE_DIR}/src/${layer}/*.in ${SOURCE_DIR}/include/axonn/${layer}/*.hpp
       ${SOURCE_DIR}/include/axonn/${layer}/*.cuh)
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]axonn/[a-z_]+/")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]axonn/([a-z_]+)/.*" "\\1" used "${line}")
      if(NOT used IN_LIST allowed)
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
        string(REPLACE ";" ", " allowed_text "${allowed}")
        string(STRIP "${line}" line)
        string(APPEND violations
               "  ${rel}: '${line}': the ${layer} layer links only ${allowed_text}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "layering: includes that go above or around a layer's CMake links "
                      "(move the code to the right layer, or link the layer in its CMakeLists.txt):\n${violations}")
endif()
if(DEFINED STAMP)
  file(TOUCH ${STAMP})
endif()
