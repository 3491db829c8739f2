// The build a misuse-catalog program is linked to (ROOSTTEST_BUILD, a
// string: "default", "secure" or "hardened"; "" for the program that runs
// on whatever allocator is preloaded), which misuse_catalog_test.cc checks
// when the environment's ROOSTTEST_BUILD does not name one.  Compiled for
// each program with its own definition, so that the catalog itself is
// compiled once for the three linked programs (tests/CMakeLists.txt).
namespace roost_test {

#ifndef ROOSTTEST_BUILD
#define ROOSTTEST_BUILD ""
#endif
extern const char kCatalogLinkedBuild[] = ROOSTTEST_BUILD;

}  // namespace roost_test
