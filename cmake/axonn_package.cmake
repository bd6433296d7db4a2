# The installed CMake package (docs/api.md): `find_package(axonn)` gives axonn::axonn (and each layer as
# axonn::<layer>), with the libraries' dependencies found for the user.
#
# Each dependency of the libraries is stated once, where the build finds it:
#   axonn_find_package(MPI REQUIRED COMPONENTS CXX SETTINGS MPI_CXX_SKIP_MPICXX)
#   axonn_find_pkg_config(PCRE2 libpcre2-8)          # PkgConfig::PCRE2
# finds it here and records the same search for axonnConfig.cmake (SETTINGS: variables whose values the
# search needs, written into the config before it). Every library made with axonn_module
# (src/CMakeLists.txt) joins the export set; axonn_install_package() writes the config at the end.
# Everything here is the install component `dev` (the tool is `tool`: cmake/axonn_cpack.cmake).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(AXONN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/axonn" CACHE STRING
    "where the CMake package (axonnConfig.cmake) is installed, relative to the prefix")

# axonn_find_package(NAME [find_package arguments...] [SETTINGS VAR...])
macro(axonn_find_package _afp_name)
  cmake_parse_arguments(_afp "" "" "SETTINGS" ${ARGN})
  find_package(${_afp_name} ${_afp_UNPARSED_ARGUMENTS})
  set(_afp_text "")
  foreach(_afp_var IN LISTS _afp_SETTINGS)  # set for the search only, then given back their values
    string(APPEND _afp_text "set(_axonn_saved_${_afp_var} \"\${${_afp_var}}\")\nset(${_afp_var} \"${${_afp_var}}\")\n")
  endforeach()
  # the consumer's search: the same arguments, without REQUIRED (find_dependency adds it) and QUIET
  set(_afp_args ${_afp_name} ${_afp_UNPARSED_ARGUMENTS})
  list(REMOVE_ITEM _afp_args REQUIRED QUIET)
  list(JOIN _afp_args " " _afp_args)
  string(APPEND _afp_text "find_dependency(${_afp_args})\n")
  foreach(_afp_var IN LISTS _afp_SETTINGS)
    string(APPEND _afp_text "set(${_afp_var} \"\${_axonn_saved_${_afp_var}}\")\n")
  endforeach()
  set_property(GLOBAL APPEND_STRING PROPERTY AXONN_PACKAGE_DEPENDENCIES "${_afp_text}")
endmacro()

# axonn_find_pkg_config(PREFIX MODULE): pkg-config's MODULE as the imported target PkgConfig::PREFIX.
macro(axonn_find_pkg_config _afpc_prefix _afpc_module)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(${_afpc_prefix} REQUIRED IMPORTED_TARGET ${_afpc_module})
  set_property(GLOBAL APPEND_STRING PROPERTY AXONN_PACKAGE_DEPENDENCIES
    "find_dependency(PkgConfig)\nif(NOT TARGET PkgConfig::${_afpc_prefix})\n  pkg_check_modules(${_afpc_prefix} REQUIRED QUIET IMPORTED_TARGET ${_afpc_module})\nendif()\n")
endmacro()

# Called by axonn_module for each library: installed, and part of the package as axonn::<name>.
function(axonn_install_library target name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS ${target} EXPORT axonnTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
endfunction()

# The headers, the export set, the Find modules the dependencies need, and the config with its version.
function(axonn_install_package)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/axonn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT dev FILES_MATCHING PATTERN "*.hpp")
  install(EXPORT axonnTargets NAMESPACE axonn:: DESTINATION ${AXONN_INSTALL_CMAKEDIR} COMPONENT dev)
  get_property(AXONN_PACKAGE_DEPENDENCIES GLOBAL PROPERTY AXONN_PACKAGE_DEPENDENCIES)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/axonnConfig.cmake.in
    ${PROJECT_BINARY_DIR}/axonnConfig.cmake INSTALL_DESTINATION ${AXONN_INSTALL_CMAKEDIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/axonnConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/axonnConfig.cmake ${PROJECT_BINARY_DIR}/axonnConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/Findxxhash.cmake ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
          DESTINATION ${AXONN_INSTALL_CMAKEDIR} COMPONENT dev)
endfunction()
