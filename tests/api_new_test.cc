// Conformance of every C++ operator new and delete form: plain, array,
// nothrow, sized, aligned (std::align_val_t up to 1 MiB), aligned+sized,
// nothrow+aligned; alignment of the results, nullptr / std::bad_alloc on
// huge sizes, std::new_handler called before failing, exceptions thrown by
// a new handler, and standard containers on top.
#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "support.h"

using namespace roost_test;

namespace {

constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kDefaultNewAlign = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

const size_t kHugeSizes[] = {SIZE_MAX, SIZE_MAX - 4096, static_cast<size_t>(PTRDIFF_MAX) + 1,
                             size_t{1} << 62, size_t{1} << 50};

// Every way of allocating, and of deallocating what it returned.
enum class Form { kPlain, kArray, kNothrow, kArrayNothrow };

void* allocate(Form f, size_t n) {
  switch (f) {
    case Form::kPlain:
      return ::operator new(n);
    case Form::kArray:
      return ::operator new[](n);
    case Form::kNothrow:
      return ::operator new(n, std::nothrow);
    case Form::kArrayNothrow:
      return ::operator new[](n, std::nothrow);
  }
  return nullptr;
}

void* allocate_aligned(Form f, size_t n, std::align_val_t a) {
  switch (f) {
    case Form::kPlain:
      return ::operator new(n, a);
    case Form::kArray:
      return ::operator new[](n, a);
    case Form::kNothrow:
      return ::operator new(n, a, std::nothrow);
    case Form::kArrayNothrow:
      return ::operator new[](n, a, std::nothrow);
  }
  return nullptr;
}

bool is_array(Form f) { return f == Form::kArray || f == Form::kArrayNothrow; }

// The delete forms matching an allocation of `n` bytes by a non-aligned form.
constexpr int kDeleteVariants = 3;
void deallocate(bool array, int variant, void* p, size_t n) {
  switch (variant % kDeleteVariants) {
    case 0:
      array ? ::operator delete[](p) : ::operator delete(p);
      break;
    case 1:
      array ? ::operator delete[](p, n) : ::operator delete(p, n);
      break;
    case 2:
      array ? ::operator delete[](p, std::nothrow) : ::operator delete(p, std::nothrow);
      break;
  }
}

// The delete forms matching an aligned allocation.
constexpr int kAlignedDeleteVariants = 3;
void deallocate_aligned(bool array, int variant, void* p, size_t n, std::align_val_t a) {
  switch (variant % kAlignedDeleteVariants) {
    case 0:
      array ? ::operator delete[](p, a) : ::operator delete(p, a);
      break;
    case 1:
      array ? ::operator delete[](p, n, a) : ::operator delete(p, n, a);
      break;
    case 2:
      array ? ::operator delete[](p, a, std::nothrow) : ::operator delete(p, a, std::nothrow);
      break;
  }
}

const Form kForms[] = {Form::kPlain, Form::kArray, Form::kNothrow, Form::kArrayNothrow};

const char* name_of(Form f) {
  switch (f) {
    case Form::kPlain:
      return "new";
    case Form::kArray:
      return "new[]";
    case Form::kNothrow:
      return "new(nothrow)";
    case Form::kArrayNothrow:
      return "new[](nothrow)";
  }
  return "?";
}

// A new handler that counts its calls and gives up (uninstalls itself) at
// the third, so the allocation then fails for good.
int g_handler_calls = 0;
void counting_handler() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}

struct HandlerGaveUp : std::bad_alloc {
  const char* what() const noexcept override { return "handler gave up"; }
};
void throwing_handler() {
  g_handler_calls++;
  throw HandlerGaveUp();
}

struct ResetNewHandler {
  ~ResetNewHandler() { std::set_new_handler(nullptr); }
};

}  // namespace

TEST(OperatorNew, IsServedByRoost) {
  REQUIRE_ROOST();
  struct roost_stats before = stats_snapshot();
  int* p = new int(5);
  escape(p);
  char* a = new char[300];
  escape(a);
  struct roost_stats after = stats_snapshot();
  EXPECT_GE(after.allocations - before.allocations, 2u);
  delete p;
  delete[] a;
  EXPECT_GE(stats_snapshot().frees - after.frees, 2u);
}

TEST(OperatorNew, EveryPlainFormReturnsDefaultAlignedWritableMemory) {
  int variant = 0;
  for (Form f : kForms) {
    std::vector<std::pair<void*, size_t>> live;
    uint64_t id = 0;
    for (size_t n = 1; n < 8 * kMiB; n += n / 5 + 1) {
      void* p = allocate(f, n);
      ASSERT_NE(p, nullptr) << name_of(f) << " " << n;
      EXPECT_TRUE(is_aligned(p, kDefaultNewAlign)) << name_of(f) << "(" << n << ") = " << p;
      fill_pattern(p, n, id++);
      live.push_back({p, n});
    }
    id = 0;
    for (auto [p, n] : live) {
      EXPECT_TRUE(check_pattern(p, n, id++)) << name_of(f) << "(" << n << ") overwritten";
      deallocate(is_array(f), variant++, p, n);
    }
  }
}

TEST(OperatorNew, ZeroSizeGivesUniqueNonNullPointers) {
  for (Form f : kForms) {
    void* a = allocate(f, opaque<size_t>(0));
    void* b = allocate(f, opaque<size_t>(0));
    ASSERT_NE(a, nullptr) << name_of(f);
    ASSERT_NE(b, nullptr) << name_of(f);
    EXPECT_NE(a, b) << name_of(f) << "(0) twice gave the same pointer";
    deallocate(is_array(f), 0, a, 0);
    deallocate(is_array(f), 1, b, 0);
  }
}

TEST(OperatorNew, EveryAlignedFormHonoursAlignmentsUpTo1MiB) {
  int variant = 0;
  uint64_t id = 0;
  for (Form f : kForms) {
    for (size_t align = 1; align <= kMiB; align *= 2) {
      std::align_val_t al{align};
      std::vector<std::pair<void*, size_t>> live;
      for (size_t n :
           {size_t{0}, size_t{1}, align - 1, align, align + 1, 3 * align, size_t{100000}}) {
        void* p = allocate_aligned(f, n, al);
        ASSERT_NE(p, nullptr) << name_of(f) << "(" << n << ", align " << align << ")";
        EXPECT_TRUE(is_aligned(p, align))
            << name_of(f) << "(" << n << ", align " << align << ") = " << p;
        fill_pattern(p, n, id + live.size());
        live.push_back({p, n});
      }
      for (size_t i = 0; i < live.size(); i++) {
        auto [p, n] = live[i];
        EXPECT_TRUE(check_pattern(p, n, id + i))
            << name_of(f) << "(" << n << ", align " << align << ")";
        deallocate_aligned(is_array(f), variant++, p, n, al);
      }
      id += live.size();
    }
  }
}

TEST(OperatorNew, OverAlignedTypesGetTheirAlignment) {
  struct alignas(256) Block {
    unsigned char bytes[300];
  };
  struct alignas(4096) PageBlock {
    unsigned char bytes[5000];
  };
  std::vector<Block*> singles;
  for (int i = 0; i < 50; i++) {
    singles.push_back(new Block());
    EXPECT_TRUE(is_aligned(singles.back(), 256));
  }
  Block* arr = new Block[17];
  EXPECT_TRUE(is_aligned(arr, 256));
  auto* page = new PageBlock[3];
  EXPECT_TRUE(is_aligned(page, 4096));
  std::vector<Block> vec(33);
  EXPECT_TRUE(is_aligned(vec.data(), 256));
  vec.resize(1000);
  EXPECT_TRUE(is_aligned(vec.data(), 256));
  for (Block* b : singles) delete b;
  delete[] arr;
  delete[] page;
}

// libstdc++ 12's aligned operator new rounds the size up to a multiple of
// the alignment without an overflow check, so on the system allocator a
// size within `align` of SIZE_MAX wraps to 0 and "succeeds".  Roost must not.
bool system_aligned_new_wraps(size_t n, size_t align) {
  return !roost_active() && n > SIZE_MAX - align;
}

TEST(OperatorNew, ThrowingFormsThrowBadAllocOnHugeSizes) {
  for (size_t n : kHugeSizes) {
    EXPECT_THROW(escape(::operator new(opaque(n))), std::bad_alloc) << n;
    EXPECT_THROW(escape(::operator new[](opaque(n))), std::bad_alloc) << n;
    for (size_t align : {size_t{32}, size_t{4096}, kMiB}) {
      if (system_aligned_new_wraps(n, align)) continue;
      std::align_val_t al{align};
      EXPECT_THROW(escape(::operator new(opaque(n), al)), std::bad_alloc)
          << n << " align " << align;
      EXPECT_THROW(escape(::operator new[](opaque(n), al)), std::bad_alloc)
          << n << " align " << align;
    }
  }
}

TEST(OperatorNew, NothrowFormsReturnNullOnHugeSizes) {
  for (size_t n : kHugeSizes) {
    EXPECT_EQ(::operator new(opaque(n), std::nothrow), nullptr) << n;
    EXPECT_EQ(::operator new[](opaque(n), std::nothrow), nullptr) << n;
    for (size_t align : {size_t{32}, size_t{4096}, kMiB}) {
      if (system_aligned_new_wraps(n, align)) continue;
      std::align_val_t al{align};
      EXPECT_EQ(::operator new(opaque(n), al, std::nothrow), nullptr) << n << " align " << align;
      EXPECT_EQ(::operator new[](opaque(n), al, std::nothrow), nullptr) << n << " align " << align;
    }
  }
}

TEST(OperatorNew, ThrowingFormsCallTheNewHandlerUntilItGivesUp) {
  ResetNewHandler reset;
  const size_t n = opaque(SIZE_MAX / 2);
  const std::align_val_t al{64};
  auto expect_three_calls_then_bad_alloc = [&](const char* what, auto&& call) {
    g_handler_calls = 0;
    std::set_new_handler(counting_handler);
    EXPECT_THROW(escape(call()), std::bad_alloc) << what;
    EXPECT_EQ(g_handler_calls, 3) << what;
    EXPECT_EQ(std::get_new_handler(), nullptr) << what;
  };
  expect_three_calls_then_bad_alloc("new", [&] { return ::operator new(n); });
  expect_three_calls_then_bad_alloc("new[]", [&] { return ::operator new[](n); });
  expect_three_calls_then_bad_alloc("new(align)", [&] { return ::operator new(n, al); });
  expect_three_calls_then_bad_alloc("new[](align)", [&] { return ::operator new[](n, al); });
}

TEST(OperatorNew, NothrowFormsCallTheNewHandlerBeforeReturningNull) {
  // [new.delete.single]: the nothrow form behaves as a call of the throwing
  // form whose failure is turned into nullptr, so the handler runs.
  ResetNewHandler reset;
  const size_t n = opaque(SIZE_MAX / 2);
  const std::align_val_t al{64};
  auto expect_three_calls_then_null = [&](const char* what, auto&& call) {
    g_handler_calls = 0;
    std::set_new_handler(counting_handler);
    EXPECT_EQ(call(), nullptr) << what;
    EXPECT_EQ(g_handler_calls, 3) << what;
  };
  expect_three_calls_then_null("new(nothrow)", [&] { return ::operator new(n, std::nothrow); });
  expect_three_calls_then_null("new[](nothrow)", [&] { return ::operator new[](n, std::nothrow); });
  expect_three_calls_then_null("new(align, nothrow)",
                               [&] { return ::operator new(n, al, std::nothrow); });
  expect_three_calls_then_null("new[](align, nothrow)",
                               [&] { return ::operator new[](n, al, std::nothrow); });
}

TEST(OperatorNew, ExceptionFromTheNewHandlerPropagatesThroughThrowingForms) {
  ResetNewHandler reset;
  const size_t n = opaque(SIZE_MAX / 2);
  std::set_new_handler(throwing_handler);
  g_handler_calls = 0;
  EXPECT_THROW(escape(::operator new(n)), HandlerGaveUp);
  EXPECT_THROW(escape(::operator new[](n)), HandlerGaveUp);
  EXPECT_THROW(escape(::operator new (n, std::align_val_t{128})), HandlerGaveUp);
  EXPECT_THROW(escape(::operator new[](n, std::align_val_t{128})), HandlerGaveUp);
  EXPECT_EQ(g_handler_calls, 4);
}

TEST(OperatorNew, NothrowFormsReturnNullWhenTheNewHandlerThrows) {
  // The nothrow forms must swallow the handler's exception and return
  // nullptr (libstdc++'s own do).  Run in a child: an exception escaping a
  // noexcept function calls std::terminate.
  const char* names[] = {"new(nothrow)", "new[](nothrow)", "new(align, nothrow)",
                         "new[](align, nothrow)"};
  for (int form = 0; form < 4; form++) {
    ChildResult r = run_in_child([form] {
      g_handler_calls = 0;
      std::set_new_handler(throwing_handler);
      const size_t n = opaque(SIZE_MAX / 2);
      const std::align_val_t al{64};
      void* p = form == 0   ? ::operator new(n, std::nothrow)
                : form == 1 ? ::operator new[](n, std::nothrow)
                : form == 2 ? ::operator new(n, al, std::nothrow)
                            : ::operator new[](n, al, std::nothrow);
      child_check(p == nullptr, "nothrow new returned non-null for a huge size");
      child_check(g_handler_calls == 1, "the new handler was not called exactly once");
    });
    EXPECT_TRUE(r.exited && r.exit_code == 0) << names[form] << ": " << r.describe();
  }
}

TEST(OperatorDelete, EveryFormAcceptsNull) {
  ::operator delete(nullptr);
  ::operator delete[](nullptr);
  ::operator delete(nullptr, std::nothrow);
  ::operator delete[](nullptr, std::nothrow);
  ::operator delete (nullptr, size_t{0});
  ::operator delete[](nullptr, size_t{0});
  ::operator delete (nullptr, std::align_val_t{64});
  ::operator delete[](nullptr, std::align_val_t{64});
  ::operator delete (nullptr, size_t{0}, std::align_val_t{64});
  ::operator delete[](nullptr, size_t{0}, std::align_val_t{64});
  ::operator delete (nullptr, std::align_val_t{64}, std::nothrow);
  ::operator delete[](nullptr, std::align_val_t{64}, std::nothrow);
  SUCCEED();
}

TEST(OperatorDelete, SizedDeleteOfNewExpressionsWorks) {
  // The compiler calls sized (and for over-aligned types, aligned sized)
  // delete for complete types.
  struct Small {
    char c[24];
  };
  struct alignas(64) Aligned {
    char c[100];
  };
  struct roost_stats before = stats_snapshot();
  for (int i = 0; i < 1000; i++) {
    Small* s = new Small();
    Aligned* a = new Aligned();
    EXPECT_TRUE(is_aligned(a, 64));
    escape(s);
    escape(a);
    delete s;
    delete a;
  }
  if (roost_active()) {
    EXPECT_GE(stats_snapshot().frees - before.frees, 2000u);
  }
}

TEST(OperatorNew, StandardContainersWork) {
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> u;
  std::set<long> s;
  for (int i = 0; i < 20000; i++) {
    m["key" + std::to_string(i)].assign(static_cast<size_t>(i % 17), i);
    u[i] = std::string(static_cast<size_t>(i % 100), static_cast<char>('a' + i % 26));
    s.insert(static_cast<long>(i) * 7919 % 100003);
  }
  for (int i = 0; i < 20000; i += 7) {
    const auto& v = m.at("key" + std::to_string(i));
    ASSERT_EQ(v.size(), static_cast<size_t>(i % 17));
    for (int x : v) ASSERT_EQ(x, i);
    ASSERT_EQ(u.at(i), std::string(static_cast<size_t>(i % 100), static_cast<char>('a' + i % 26)));
  }
  EXPECT_EQ(s.size(), 20000u);
  for (int i = 0; i < 20000; i += 2) m.erase("key" + std::to_string(i));
  EXPECT_EQ(m.size(), 10000u);
}
