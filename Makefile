# The README's two commands: `make bench` and `make test` (`make bench-full`:
# the long benchmark run that regenerates docs/BENCHMARKS.md; `make soak`:
# the soak of tests/soak/, opt-in, SOAK_SECONDS per build; `make fuzz-long`:
# the libFuzzer harnesses of tests/fuzz/, opt-in, FUZZ_SECONDS each, on a
# corpus kept in build/fuzz/corpus/).
# Build trees live under build/: debug, release, asan and tsan (the
# non-overriding parts under AddressSanitizer / ThreadSanitizer), and fuzz
# (clang, ROOST_FUZZ=ON: the harnesses against libroost.a and
# libroost-secure.a).  `make test` runs every ctest suite of the first four
# (the release tree's but its `extended` label) and the four fuzz binaries
# for FUZZ_TEST_SECONDS each, two at a time (about half a minute), on a
# temporary copy of the seeds (`make test-fuzz`): every part even when one
# fails, then one summary.  `make test-extended` (what .ci/run runs after
# `make test`): the same suites again in other settings, the same way: the
# debug and tsan trees with ROOST_OFFLOAD=1 (`make test-offload`), the
# AArch64 tree's emulated tests and its install (`make test-aarch64`,
# `make test-aarch64-install`), and the Rust crate packaged and built with
# its oldest toolchain (`make test-rust-extended`).  `make test-under-load`
# (opt-in): the debug, tsan and offload parts on a machine kept busy, three
# times.

JOBS ?= $(shell nproc)
CMAKE ?= cmake
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CTEST_FLAGS ?= --output-on-failure -j $(JOBS)

.PHONY: all release debug asan tsan fuzz test test-extended test-under-load test-debug test-release test-asan test-tsan test-offload test-fuzz test-rust-extended test-aarch64 test-aarch64-install fuzz-long bench bench-full soak install clean format

all: release

build/%/.configured:
	@mkdir -p build/$*
	$(CMAKE) -S . -B build/$* $(GEN) $(CMAKE_ARGS_$*)
	@touch $@

CMAKE_ARGS_release := -DCMAKE_BUILD_TYPE=Release -DROOST_TESTS=ON -DROOST_BENCH=ON
# The debug, fuzz (clang) and AArch64 trees treat warnings as errors: CI
# keeps the build warning-free with each compiler.
CMAKE_ARGS_debug := -DCMAKE_BUILD_TYPE=Debug -DROOST_TESTS=ON -DROOST_BENCH=ON -DCMAKE_COMPILE_WARNING_AS_ERROR=ON
CMAKE_ARGS_asan := -DCMAKE_BUILD_TYPE=Debug -DROOST_TESTS=ON -DROOST_SANITIZE=address
CMAKE_ARGS_tsan := -DCMAKE_BUILD_TYPE=Debug -DROOST_TESTS=ON -DROOST_SANITIZE=thread
CMAKE_ARGS_fuzz := -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROOST_FUZZ=ON -DROOST_TESTS=OFF -DROOST_BENCH=OFF -DCMAKE_COMPILE_WARNING_AS_ERROR=ON

release debug asan tsan fuzz: %: build/%/.configured
	$(CMAKE) --build build/$* -j $(JOBS)

# The label `extended` marks the tests that belong to `make test-extended`.
test-release test-debug test-asan test-tsan: test-%: %
	ctest --test-dir build/$* $(CTEST_FLAGS) -LE extended

# The debug and ThreadSanitizer suites once more with full offload
# (ROOST_OFFLOAD=1, experimental): every test holds with it switched on.
# (Both trees run even when the first fails.)
test-offload: debug tsan
	@st=0; \
	ROOST_OFFLOAD=1 ctest --test-dir build/debug $(CTEST_FLAGS) || st=1; \
	ROOST_OFFLOAD=1 ctest --test-dir build/tsan $(CTEST_FLAGS) || st=1; \
	exit $$st

# The fuzz harnesses (tests/fuzz/), bounded: each of the four binaries for
# FUZZ_TEST_SECONDS on a temporary copy of the seeds; what they find goes to
# build/fuzz/findings/.
FUZZ_TEST_SECONDS ?= 15
test-fuzz: fuzz
	bash tests/fuzz/run_fuzzers.sh --seconds $(FUZZ_TEST_SECONDS)

# Linux on AArch64 (docs/PLATFORMS.md): build/aarch64 is the release tree
# cross-compiled with Debian's g++-aarch64-linux-gnu; only the library and
# the tests of tests/emulated.cmake are built, and ctest runs them under
# qemu-aarch64-static (at 4 KiB pages, and some again at 16 and 64 KiB).
# `make test-aarch64-install`: the cross build installed, then found with
# pkg-config and find_package.  Both are parts of `make test-extended`.
# Both install what is missing first, as `make test` does.
CMAKE_ARGS_aarch64 := -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release -DROOST_TESTS=ON -DROOST_BENCH=OFF -DROOST_GTEST_SOURCE=/usr/src/googletest -DCMAKE_COMPILE_WARNING_AS_ERROR=ON
test-aarch64:
	bash tools/test_deps.sh
	$(MAKE) build/aarch64/.configured
	$(CMAKE) --build build/aarch64 -j $(JOBS) --target roost_emulated
	ctest --test-dir build/aarch64 $(CTEST_FLAGS) -LE install

test-aarch64-install:
	bash tools/test_deps.sh
	$(MAKE) build/aarch64/.configured
	$(CMAKE) --build build/aarch64 -j $(JOBS) --target roost_emulated_install
	ctest --test-dir build/aarch64 $(CTEST_FLAGS) -L install

# What the trees need is installed first (tools/test_deps.sh: with apt-get
# as root; otherwise it names what is missing and the command, and stops).
# Then every part runs to its end even when another failed, and one summary
# of them all closes the run (tools/test_trees.sh; logs in build/test-logs/);
# the exit status is non-zero if any part failed.
TEST_PARTS := test-debug test-release test-asan test-tsan test-fuzz
test:
	bash tools/test_deps.sh
	MAKE="$(MAKE)" bash tools/test_trees.sh $(TEST_PARTS)

# The Rust crate's tests of the release tree labelled `extended` (the
# `.crate` that `cargo package` makes, and the crate as a user's path
# dependency built with rustc 1.63).
test-rust-extended: release
	ctest --test-dir build/release $(CTEST_FLAGS) -L extended

# The suites in other settings than `make test`'s (see the top of this
# file); run the same way, with its own summary (logs in
# build/test-logs/extended/).  Assumes nothing of `make test`: each part
# builds what it runs.
EXTENDED_PARTS := test-offload test-rust-extended test-aarch64 test-aarch64-install
test-extended:
	bash tools/test_deps.sh
	MAKE="$(MAKE)" bash tools/test_trees.sh --log-dir build/test-logs/extended $(EXTENDED_PARTS)

# Opt-in: the debug, ThreadSanitizer and offload parts with the machine kept
# busy (one CPU hog per core: stress-ng, installed when missing as root, or
# shell loops), UNDER_LOAD_RUNS times (tools/test_under_load.sh).
UNDER_LOAD_RUNS ?= 3
test-under-load:
	bash tools/test_deps.sh
	MAKE="$(MAKE)" bash tools/test_under_load.sh --runs $(UNDER_LOAD_RUNS)

# The fuzz harnesses for FUZZ_SECONDS each, on a corpus kept between runs in
# build/fuzz/corpus/.
FUZZ_SECONDS ?= 600
fuzz-long: fuzz
	bash tests/fuzz/run_fuzzers.sh --seconds $(FUZZ_SECONDS) --corpus build/fuzz/corpus

# The soak, twice: roost_* under AddressSanitizer, then malloc & co. linked
# to libroost.a (Release); both run even when the first fails.
SOAK_SECONDS ?= 100
soak: release asan
	@st=0; \
	build/asan/tests/soak/roost_soak_prefixed --seconds $(SOAK_SECONDS) || st=1; \
	build/release/tests/soak/roost_soak --seconds $(SOAK_SECONDS) || st=1; \
	exit $$st

# bench/run builds only what the benchmarks run (the workload programs and
# libroost.so) in build/release, configuring it without the tests if it is
# not configured yet (make release and make test configure it again, tests
# included).
bench:
	bash bench/run

bench-full:
	bash bench/run --full

# `make install PREFIX=/opt/roost`: the release build under PREFIX (default
# /usr/local): headers, libraries, roost-run, CMake package, pkg-config files.
# It builds only what it installs (the target roost_install_products,
# cmake/install.cmake), in build/release; a tree not configured yet is
# configured without the tests and benchmarks, so none of them is built and
# GoogleTest is not needed (make release and make test configure it again
# with them).
PREFIX ?= /usr/local
INSTALL_CMAKE_ARGS := -DCMAKE_BUILD_TYPE=Release -DROOST_TESTS=OFF -DROOST_BENCH=OFF
install:
	[ -f build/release/CMakeCache.txt ] || $(CMAKE) -S . -B build/release $(GEN) $(INSTALL_CMAKE_ARGS)
	$(CMAKE) --build build/release -j $(JOBS) --target roost_install_products
	$(CMAKE) --install build/release --prefix $(PREFIX)

clean:
	rm -rf build

format:
	clang-format -i $$(git ls-files '*.h' '*.cc' '*.c')
