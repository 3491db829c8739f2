# cmake/gtest.cmake — GoogleTest for the tests (GTest::gtest and
# GTest::gtest_main): the build machine's package, or, when
# ROOST_GTEST_SOURCE names GoogleTest's source tree, built from it with the
# tests' compiler.  A cross build needs the latter (there is no GTest
# package for its target); Debian's googletest package (a dependency of
# libgtest-dev) puts the sources in /usr/src/googletest.
if(TARGET GTest::gtest)
  return()
endif()
set(ROOST_GTEST_SOURCE "" CACHE PATH "GoogleTest's sources, built for the tests instead of the GTest package")
if(ROOST_GTEST_SOURCE)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${ROOST_GTEST_SOURCE} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  # GoogleTest 1.11 and later name them GTest::* themselves.
  foreach(lib gtest gtest_main)
    if(NOT TARGET GTest::${lib})
      add_library(GTest::${lib} ALIAS ${lib})
    endif()
  endforeach()
else()
  find_package(GTest REQUIRED)
endif()
