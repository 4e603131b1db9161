# `cmake --install`: the programs, the two C APIs with their headers, the runtime their
# compiled models need, and the files other build systems find them by (a CMake package,
# Kiln::kiln_model / Kiln::kiln_db / Kiln::kiln_runtime, and pkg-config files).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed files find each other relative to themselves, wherever the prefix is:
# libraries beside each other ($ORIGIN), programs in ../lib from bin.
file(RELATIVE_PATH KILN_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(KILN_INSTALLED_LIBRARIES kiln_runtime)
set(KILN_INSTALLED_PROGRAMS kiln-runner kiln-measure-server kiln-cuda-measure)
if(NOT KILN_RUNNER_ONLY)
  list(APPEND KILN_INSTALLED_LIBRARIES kiln_model kiln_db kiln_export)
  list(APPEND KILN_INSTALLED_PROGRAMS kiln)
endif()
set_target_properties(${KILN_INSTALLED_LIBRARIES} PROPERTIES INSTALL_RPATH "$ORIGIN")
set_target_properties(${KILN_INSTALLED_PROGRAMS} PROPERTIES INSTALL_RPATH "$ORIGIN/${KILN_BIN_TO_LIB}")

install(TARGETS ${KILN_INSTALLED_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${KILN_INSTALLED_LIBRARIES} EXPORT KilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/codegen/runtime/abi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
# The runner's systemd unit, naming the installed kiln-runner. Written when installing:
# `cmake --install --prefix P` then names P's runner, where the prefix known at
# configure time named one that was not there.
install(CODE "
  set(CMAKE_INSTALL_FULL_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/rpc/kiln-runner.service.in\"
    \"${CMAKE_CURRENT_BINARY_DIR}/install-time/kiln-runner.service\" @ONLY)
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/kiln\" TYPE FILE
    FILES \"${CMAKE_CURRENT_BINARY_DIR}/install-time/kiln-runner.service\")
")

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/KilnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/KilnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/KilnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/KilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})

# pkg-config: kiln_model, kiln_db, kiln_runtime. A .pc file names its prefix relative to
# its own folder (pcfiledir), so a moved prefix still works.
file(RELATIVE_PATH KILN_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
foreach(library ${KILN_INSTALLED_LIBRARIES})
  if(library STREQUAL "kiln_model")
    set(KILN_PC_DESCRIPTION "Load and run models compiled by kiln compile (kiln_model.h)")
  elseif(library STREQUAL "kiln_export")
    set(KILN_PC_DESCRIPTION "Build tuned kernels from a Kiln database into objects to link (kiln_export.h)")
  elseif(library STREQUAL "kiln_db")
    set(KILN_PC_DESCRIPTION "Look up tuned schedules in a Kiln database (kiln_db.h)")
  else()
    set(KILN_PC_DESCRIPTION "The runtime Kiln's generated kernels call (kiln/abi.h)")
  endif()
  set(KILN_PC_LIBRARY ${library})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${library}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${library}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
