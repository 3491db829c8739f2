# cmake/install.cmake — what `cmake --install` puts under the prefix:
# roost.h (and the counter list it includes), libroost.so (versioned
# SONAME), libroost.a, libroost-prefixed.a, the secure and hardened
# builds' libroost-secure.so and .a and libroost-hardened.so and .a,
# roost-run, the CMake package roost (targets roost::roost,
# roost::prefixed, roost::shared, roost::secure, roost::secure_shared,
# roost::hardened, roost::hardened_shared) and the pkg-config files
# roost.pc, roost-prefixed.pc, roost-secure.pc and roost-hardened.pc.
#
# Must never: write an absolute path of the build machine into what it
# installs; the package and .pc files find the prefix from where they lie,
# so an install can be moved.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(roost PROPERTIES EXPORT_NAME shared)
set_target_properties(roost_static PROPERTIES EXPORT_NAME roost)
set_target_properties(roost_prefixed PROPERTIES EXPORT_NAME prefixed)
set_target_properties(roost_secure PROPERTIES EXPORT_NAME secure_shared)
set_target_properties(roost_secure_static PROPERTIES EXPORT_NAME secure)
set_target_properties(roost_hardened PROPERTIES EXPORT_NAME hardened_shared)
set_target_properties(roost_hardened_static PROPERTIES EXPORT_NAME hardened)

install(TARGETS roost roost_static roost_prefixed roost_secure roost_secure_static roost_hardened
                roost_hardened_static roost_run
        EXPORT roostTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/roost.h include/roost_stats.def DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(roost_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/roost)
install(EXPORT roostTargets NAMESPACE roost:: DESTINATION ${roost_cmake_dir})
configure_package_config_file(cmake/roostConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/roostConfig.cmake
                              INSTALL_DESTINATION ${roost_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/roostConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/roostConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/roostConfigVersion.cmake
        DESTINATION ${roost_cmake_dir})

# pkg-config: the prefix relative to the .pc file's folder (${pcfiledir});
# folders given as absolute paths stay as they are.
file(RELATIVE_PATH roost_pc_to_prefix /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" roost_pc_to_prefix "${roost_pc_to_prefix}")
set(roost_pc_prefix "\${pcfiledir}/${roost_pc_to_prefix}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(roost_pc_${dir} "${CMAKE_INSTALL_${dir}}")
    set(roost_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  else()
    set(roost_pc_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
foreach(pc roost roost-prefixed roost-secure roost-hardened)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
