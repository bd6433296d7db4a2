# The Debian packages (docs/api.md), made by `cpack --preset cpu-release` from a build:
#   axonn         the tool (/usr/bin/axonn) and the machine profiles (/usr/share/axonn/profiles); its
#                 Depends are the runtime libraries the binary links, found by dpkg-shlibdeps
#   libaxonn-dev  the headers, the static libraries and the CMake package (find_package(axonn)); it
#                 Depends on axonn and on the -dev packages whose libraries and CMake packages the
#                 installed axonnConfig.cmake looks for (a user's program links them: the libraries
#                 are static)
# The install components are the packages: `tool` and `dev` (cmake/axonn_package.cmake).
#
# A build with AXONN_NATIVE=ON (the default) is tuned to the building machine's CPU (-march=native):
# its packages run only on CPUs like it. For packages to hand out, configure with -DAXONN_NATIVE=OFF.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME axonn)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "axonn developers <axonn@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "4D hybrid-parallel (AxoNN) training of GPT models, in C++ on MPI")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tool dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_TOOL_PACKAGE_NAME axonn)
# (a description's first line is CPACK_PACKAGE_DESCRIPTION_SUMMARY)
set(CPACK_COMPONENT_TOOL_DESCRIPTION "The axonn command-line tool: train, plan, calibrate, bench, convert, inspect, prepare, report.")
set(CPACK_DEBIAN_TOOL_PACKAGE_SHLIBDEPS ON)  # dpkg-shlibdeps (dpkg-dev) on /usr/bin/axonn
# mpiexec runs it on more than one rank
set(CPACK_DEBIAN_TOOL_PACKAGE_RECOMMENDS openmpi-bin)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libaxonn-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "The C++ library: headers, static libraries and the CMake package (find_package(axonn) gives axonn::axonn).")
set(_axonn_dev_depends "axonn (= ${PROJECT_VERSION})" libopenmpi-dev libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
    nlohmann-json3-dev libtomlplusplus-dev libxxhash-dev libpng-dev libpcre2-dev libsentencepiece-dev pkg-config)
list(JOIN _axonn_dev_depends ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS)
include(CPack)
