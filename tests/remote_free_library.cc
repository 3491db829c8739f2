// What remote_free_test.cc needs to know of the library a remote-free
// program links that it cannot ask it: its outbox buckets
// (ROOST_TEST_BUCKET_BITS: roost::prefixed_k1's 1) and whether BatchIt is
// compiled out (ROOST_TEST_NO_BATCHIT: roost::prefixed_nobatchit).  Compiled
// for each program with its own definitions, so that the test's own objects
// are compiled once for all the prefixed programs (tests/CMakeLists.txt).
namespace roost_test {

#if defined(ROOST_TEST_BUCKET_BITS)
extern const unsigned kRemoteFreeBucketBits = ROOST_TEST_BUCKET_BITS;
#else
extern const unsigned kRemoteFreeBucketBits = 6;  // roost's default (src/config.h)
#endif

#if defined(ROOST_TEST_NO_BATCHIT)
extern const bool kRemoteFreeBatchitCompiled = false;
#else
extern const bool kRemoteFreeBatchitCompiled = true;
#endif

}  // namespace roost_test
