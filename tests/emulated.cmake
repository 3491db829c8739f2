# tests/emulated.cmake — the tests of a cross build (`make test-aarch64`),
# run under the emulator (CMAKE_CROSSCOMPILING_EMULATOR: qemu-user; see
# cmake/toolchains/aarch64-linux-gnu.cmake and docs/PLATFORMS.md).
# Included by tests/CMakeLists.txt instead of its own registrations when
# CMAKE_CROSSCOMPILING; the target roost_emulated builds what they run and
# nothing else.
#
# A subset, chosen to fit `make test`'s time: under emulation a test costs
# 10 to 40 times its native time.  Left out are the tests that need what
# qemu-user does not emulate (an address-space limit, RLIMIT_AS; exec of a
# program for the target, which needs binfmt_misc; transparent huge pages)
# and the slowest of the rest, which the x86-64 trees run.  Those that
# depend most on the page size run again with the emulator reporting 16
# and 64 KiB pages (QEMU_PAGESIZE; qemu-user reports that page to the
# program and aligns its mappings to it, but takes ranges at 4 KiB, which
# the platform layer refuses itself: platform/os.cc).
#
#   unit, unit.page16k, unit.page64k   every unit test but those below
#   api.static, api.static.page64k     the malloc family, the C++
#                                      operators, thread lifecycle and
#                                      glibc's introspection calls through
#                                      libroost.a, but the slowest
#   remote_free.static                 producer-consumer with checksums,
#                                      owners that nap and sleep (the
#                                      service sorting their mail)
#   fork.static                        fork() 25 times while 3 threads
#                                      allocate and free
#   lifecycle.*                        library constructors, exit handlers,
#                                      dlopen of libroost.so, the report at
#                                      exit, each the ways it is linked
#   install (label install)            the cross build installed and used
#                                      through pkg-config and find_package:
#                                      `make test-aarch64-install`

set(ROOST_EMULATED_TARGETS)

# --- unit tests -------------------------------------------------------------
# Not emulated: the address-space limit (AddressSpace.RegionsShrink...),
# exec of /proc/self/exe (AddressSpace.TheLayoutDiffers..., ErrorOutput's
# threadsafe death tests), MADV_HUGEPAGE and MADV_COLLAPSE (HugePages.*,
# DenseHugePages.*: qemu-user accepts both and does neither).
set(EMU_UNIT_FILTER
    "--gtest_filter=-AddressSpace.RegionsShrinkUnderAnAddressSpaceLimit:AddressSpace.TheLayoutDiffersFromProcessToProcess:ErrorOutput.KeptStderrOutlivesClosingFd2:ErrorOutput.FatalPrintsOneLineAndAborts:HugePages.*:DenseHugePages.*")
foreach(page 4 16 64)
  set(name unit.page${page}k)
  if(page EQUAL 4)
    set(name unit)
  endif()
  add_test(NAME ${name} COMMAND roost_unit_tests ${EMU_UNIT_FILTER})
  math(EXPR bytes "${page} * 1024")
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "QEMU_PAGESIZE=${bytes}" TIMEOUT 300)
endforeach()
list(APPEND ROOST_EMULATED_TARGETS roost_unit_tests)

# --- malloc family and C++ operators, linked to libroost.a --------------------
# api_misuse_test.cc is left out: its death tests expect one line on stderr
# and qemu-user adds its own ("qemu: uncaught target signal 6"), and its
# out-of-memory tests need RLIMIT_AS.  The tests left out below take 1.5 to
# 40 s each under emulation.
roost_gtest(roost_api_tests_static
            SOURCES api_malloc_test.cc api_new_test.cc api_lifecycle_test.cc
                    api_introspection_test.cc static_init.cc
            LIBS roost::roost DEFINES ROOST_TEST_LINKED=1)
set(EMU_API_FILTER
    "--gtest_filter=-Calloc.IsZeroAfterAHistoryOfLargeBlocks:Calloc.ZeroesMemoryThatWasDirtyBeforeReuse:Calloc.LargeBlocksAreZeroIncludingAfterReuse:Fork.ChildCanAllocateWhileOtherThreadsWereAllocating:ThreadExit.ObjectsOfExitedThreadsCanBeFreedAndReallocatedElsewhere:ThreadExit.MallocWorksAfterManyThreadsHaveExited:ThreadExit.ThreadsCanFreeObjectsOfTheMainThread:OperatorNew.EveryPlainFormReturnsDefaultAlignedWritableMemory:OperatorNew.EveryAlignedFormHonoursAlignmentsUpTo1MiB:MallocTrim.ReturnsZeroOrOneAndKeepsLiveBlocksIntact:Realloc.PreservesContentGrowingTo4MiBAndShrinkingBack:Malloc.UsableSizeIsAtLeastTheRequestAndAllOfItIsWritable")
add_test(NAME api.static COMMAND roost_api_tests_static ${EMU_API_FILTER})
add_test(NAME api.static.page64k COMMAND roost_api_tests_static ${EMU_API_FILTER})
set_tests_properties(api.static PROPERTIES ENVIRONMENT "ROOSTTEST_EXPECT=1" TIMEOUT 180)
set_tests_properties(api.static.page64k PROPERTIES
  ENVIRONMENT "ROOSTTEST_EXPECT=1;QEMU_PAGESIZE=65536" TIMEOUT 180)
list(APPEND ROOST_EMULATED_TARGETS roost_api_tests_static)

# --- remote frees through malloc/free -----------------------------------------
roost_gtest(roost_remote_free_tests_static SOURCES remote_free_test.cc remote_free_library.cc
            LIBS roost::roost DEFINES ROOST_TEST_LINKED=1)
add_test(NAME remote_free.static COMMAND roost_remote_free_tests_static
         "--gtest_filter=RemoteFree.ProducerConsumerChecksumsAndCountersBalance:RemoteFree.ASleepingOwnersWholeSlabsGoBackWhileItSleeps:RemoteFree.OwnersThatNapWhileOthersFreeLoseNothing")
set_tests_properties(remote_free.static PROPERTIES ENVIRONMENT "ROOSTTEST_EXPECT=1" TIMEOUT 240)
list(APPEND ROOST_EMULATED_TARGETS roost_remote_free_tests_static)

# --- fork ---------------------------------------------------------------------
roost_gtest(roost_fork_tests_static SOURCES fork_test.cc LIBS roost::roost
            DEFINES ROOST_TEST_LINKED=1)
add_test(NAME fork.static COMMAND roost_fork_tests_static)
set_tests_properties(fork.static PROPERTIES
  ENVIRONMENT "ROOSTTEST_EXPECT=1;ROOSTTEST_FORKS=25" TIMEOUT 180)
list(APPEND ROOST_EMULATED_TARGETS roost_fork_tests_static)

# --- early and late calls (tests/lifecycle), through lifecycle_run.py -----------
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # lifecycle/ builds its fully static program where the target's static
  # libc links (the same check as tests/CMakeLists.txt's).
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_LINK_OPTIONS -static)
  set(CMAKE_REQUIRED_LIBRARIES Threads::Threads)
  check_c_source_compiles("#include <stdlib.h>
int main(void) { free(malloc(1)); return 0; }"
                          ROOST_CAN_LINK_STATIC)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  unset(CMAKE_REQUIRED_LIBRARIES)
  set(ROOST_EMULATED_LIFECYCLE
      lifecycle.library_constructors.static lifecycle.library_constructors.shared
      lifecycle.library_constructors.preload
      lifecycle.exit_handlers.static lifecycle.exit_handlers.shared lifecycle.exit_handlers.preload
      lifecycle.dlopen_libroost.static lifecycle.dlopen_libroost.preload
      lifecycle.dlopen_libroost.glibc
      lifecycle.stats_at_exit.static lifecycle.stats_at_exit.shared
      lifecycle.stats_at_exit.prefixed lifecycle.stats_at_exit.fully_static)
  add_subdirectory(lifecycle)
  list(APPEND ROOST_EMULATED_TARGETS lc_program_static lc_program_shared lc_program lc_dlopen_lib
       lc_stats_at_exit_static lc_stats_at_exit_shared lc_stats_at_exit_prefixed)
  if(TARGET lc_stats_at_exit_fully_static)
    list(APPEND ROOST_EMULATED_TARGETS lc_stats_at_exit_fully_static)
  endif()
else()
  message(WARNING "python3 not found: the emulated lifecycle tests are not registered")
endif()

# Build time, which `make test-extended` pays on every run: the test
# programs are compiled at -O1 in every tree (ROOST_TEST_FLAGS,
# ../CMakeLists.txt); here the unit tests and GoogleTest, built from its
# sources, are too (the library keeps the release tree's flags).
foreach(t roost_unit_tests gtest gtest_main)
  target_compile_options(${t} PRIVATE -O1)
endforeach()

add_custom_target(roost_emulated DEPENDS ${ROOST_EMULATED_TARGETS} roost)

# --- roost installed for the target and found as a user would ---------------
# tests/install_test.sh with the cross compiler, this toolchain file and
# the emulator: cmake --install into a temporary prefix, then pkg-config,
# find_package(roost) (through CMAKE_FIND_ROOT_PATH) and roost-run
# --version/--help.  It needs every product (the secure and hardened
# builds' objects too: about a minute more to build), so it has a target
# of its own, roost_emulated_install (what the install holds:
# roost_install_products, cmake/install.cmake), and the label `install`:
# `make test-aarch64` leaves it out, `make test-aarch64-install` runs it
# (.ci/run does, after `make test`).
add_test(NAME install
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${PROJECT_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/install.work)
string(REPLACE ";" " " emu_command "${CMAKE_CROSSCOMPILING_EMULATOR}")
set_tests_properties(install PROPERTIES LABELS install TIMEOUT 300
  ENVIRONMENT "CC=${CMAKE_C_COMPILER};ROOSTTEST_TOOLCHAIN=${CMAKE_TOOLCHAIN_FILE};ROOSTTEST_EMULATOR=${emu_command}")
add_custom_target(roost_emulated_install)
add_dependencies(roost_emulated_install roost_install_products)
