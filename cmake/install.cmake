# cmake/install.cmake — what `cmake --install` puts under the prefix:
# roost.h (and the counter list it includes), libroost.so (versioned
# SONAME), libroost.a, libroost-prefixed.a, the secure and hardened
# builds' libroost-secure.so and .a and libroost-hardened.so and .a,
# roost-run, the CMake package roost (targets roost::roost,
# roost::prefixed, roost::shared, roost::secure, roost::secure_shared,
# roost::hardened, roost::hardened_shared) and the pkg-config files
# roost.pc, roost-prefixed.pc, roost-secure.pc and roost-hardened.pc; and
# the target roost_install_products, which builds what it installs and
# nothing else (`make install`).
#
# Must never: write a path of the build tree or the sources into what it
# installs.  The CMake package finds the prefix from where it lies, so an
# install can be moved; the .pc files name the prefix they are installed
# under, their only absolute path (pkg-config's --define-prefix finds a
# moved install).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(roost PROPERTIES EXPORT_NAME shared)
set_target_properties(roost_static PROPERTIES EXPORT_NAME roost)
set_target_properties(roost_prefixed PROPERTIES EXPORT_NAME prefixed)
set_target_properties(roost_secure PROPERTIES EXPORT_NAME secure_shared)
set_target_properties(roost_secure_static PROPERTIES EXPORT_NAME secure)
set_target_properties(roost_hardened PROPERTIES EXPORT_NAME hardened_shared)
set_target_properties(roost_hardened_static PROPERTIES EXPORT_NAME hardened)

set(roost_install_targets roost roost_static roost_prefixed roost_secure roost_secure_static
                          roost_hardened roost_hardened_static roost_run)
add_custom_target(roost_install_products)
add_dependencies(roost_install_products ${roost_install_targets})
install(TARGETS ${roost_install_targets}
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

# pkg-config: the .pc files name the prefix `cmake --install` installs to
# (its --prefix, else CMAKE_INSTALL_PREFIX) as an absolute path, so that
# pkg-config prints plain paths, -I<prefix>/include and <prefix>/lib (a
# prefix relative to ${pcfiledir} would print
# <prefix>/lib/pkgconfig/../../include, and put such a path into the
# rpaths users take from it).  That prefix is known only when the install
# runs, so they are configured twice: here with everything else, then by
# the install with the prefix, absolute (a relative --prefix is taken from
# the current folder, as the install takes it), normalised, without
# DESTDIR, and empty for / (the install script makes it empty; ${prefix}/include
# is then /include).  Folders given as absolute paths stay as they are.
set(roost_pc_prefix "@roost_install_prefix@")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(roost_pc_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(roost_pc_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(roost_pc_names roost roost-prefixed roost-secure roost-hardened)
set(roost_pc_files)
foreach(pc ${roost_pc_names})
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc.in @ONLY)
  list(APPEND roost_pc_files ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/${pc}.pc)
endforeach()
install(CODE "
  set(roost_install_prefix \"\")
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL \"\")
    get_filename_component(roost_install_prefix \"\${CMAKE_INSTALL_PREFIX}\" ABSOLUTE)
  endif()
  foreach(pc ${roost_pc_names})
    configure_file(\"${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/\${pc}.pc.in\"
                   \"${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/\${pc}.pc\" @ONLY)
  endforeach()")
install(FILES ${roost_pc_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
