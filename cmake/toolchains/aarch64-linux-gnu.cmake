# cmake/toolchains/aarch64-linux-gnu.cmake — cross-compiling roost for
# Linux on AArch64 with Debian's cross toolchain (g++-aarch64-linux-gnu,
# whose target libraries live in /usr/aarch64-linux-gnu), and running what
# it builds under qemu-user (qemu-user-static): ctest runs every test whose
# command is a built program through CMAKE_CROSSCOMPILING_EMULATOR.
#
#   cmake -S . -B build/aarch64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
#
# ROOST_CROSS_PREFIX overrides the triplet's prefix of the tools
# (aarch64-linux-gnu-), ROOST_CROSS_SYSROOT the target's library folder.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED ROOST_CROSS_PREFIX)
  set(ROOST_CROSS_PREFIX aarch64-linux-gnu-)
endif()
if(NOT DEFINED ROOST_CROSS_SYSROOT)
  set(ROOST_CROSS_SYSROOT /usr/aarch64-linux-gnu)
endif()
# (try_compile projects read this file again: they get the same values.)
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ROOST_CROSS_PREFIX ROOST_CROSS_SYSROOT)
set(CMAKE_C_COMPILER ${ROOST_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${ROOST_CROSS_PREFIX}g++)

# Libraries, headers and packages of the target only (the target's
# library folder, and whatever -DCMAKE_FIND_ROOT_PATH adds: a prefix where
# roost for the target was installed, say); programs (python3, pkg-config)
# of the build machine.
list(APPEND CMAKE_FIND_ROOT_PATH ${ROOST_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The emulator, with the target's dynamic loader and libraries.  The page
# size it reports to programs can be set with QEMU_PAGESIZE in the
# environment (docs/PLATFORMS.md says what that does and does not emulate).
find_program(ROOST_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(ROOST_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${ROOST_QEMU_AARCH64} -L ${ROOST_CROSS_SYSROOT})
endif()
