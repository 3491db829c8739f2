// bench/sqlite.c — SQLite building a table and its index in memory: a real
// library's allocation pattern (statement parsing, a page cache of 4 KiB
// pages, b-tree cells, the sorter's large runs), one thread.
//
// Written here for roost's suite after the "sqlite building a 200k-row table
// and its index" run of real programs under LD_PRELOAD; this program drives
// the same library through its C API so that the suite can time it without
// the sqlite3 shell's parsing of a script.  Unlike the other workloads it
// links libsqlite3 (Debian's, the system allocator's `malloc` underneath:
// SQLite's default memory methods call malloc, free, realloc and
// malloc_usable_size); it is built only where its headers are installed.
//
// What it does, all inside the measured time, on a database in memory:
//   1. CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL, d BLOB);
//   2. inserts -n rows in one transaction through one prepared statement:
//      b is 8..71 letters, c a number, d 0..255 bytes (both from a fixed
//      seed, so every allocator sees the same rows);
//   3. CREATE INDEX on b (the sorter);
//   4. a GROUP BY over b's first letter, through the index;
//   5. deletes every third row and updates every fifth one's blob;
//   6. closes the database (every page freed).
//
// Verification: the GROUP BY's counts and lengths, the rows left after the
// delete and the sum of their blob lengths are checked against what the
// program computed as it generated the rows; a failed SQLite call or a
// mismatch prints a diagnostic and exits 1.
//
// Options (k/m suffixes: x1000, x1000000):
//   -n N  rows   default 200000
//
// Output (stdout, one line of key=value pairs): rows, seconds, rows_per_sec,
// then the common tail (vmhwm_kib, malloc_from, verify).  The allocator
// under test is swapped with LD_PRELOAD.
#define _GNU_SOURCE
#include <sqlite3.h>

#include "bench_common.h"

static const char kProg[] = "sqlite";

// Row k's text: 8..71 lowercase letters.  Its first letter is returned in
// *first.  buf holds at least 72 bytes.
static int RowText(uint64_t k, char* buf, char* first) {
  BenchRng r = {BenchMix(k ^ 0x5911e7ull)};
  int len = 8 + (int)BenchBelow(&r, 64);
  for (int i = 0; i < len; i++) buf[i] = (char)('a' + BenchBelow(&r, 26));
  *first = buf[0];
  return len;
}

// Row k's blob length, 0..255, and its bytes.
static int RowBlob(uint64_t k, unsigned char* buf) {
  BenchRng r = {BenchMix(k ^ 0xb10bull << 20)};
  int len = (int)BenchBelow(&r, 256);
  for (int i = 0; i < len; i++) buf[i] = (unsigned char)BenchNext(&r);
  return len;
}

static int Fail(sqlite3* db, const char* what) {
  fprintf(stderr, "%s: %s: %s\n", kProg, what, db != NULL ? sqlite3_errmsg(db) : "no database");
  return 0;
}

static int Exec(sqlite3* db, const char* sql) {
  char* err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "%s: %s: %s\n", kProg, sql, err != NULL ? err : "?");
    sqlite3_free(err);
    return 0;
  }
  return 1;
}

// One integer from a query of one row.
static int QueryInt(sqlite3* db, const char* sql, int64_t* out) {
  sqlite3_stmt* st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return Fail(db, sql);
  int ok = sqlite3_step(st) == SQLITE_ROW;
  if (ok) *out = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return ok ? 1 : Fail(db, sql);
}

int main(int argc, char** argv) {
  uint64_t n = 200000;
  const BenchOption opts[] = {{"-n", &n}};
  if (BenchParseOptions(argc, argv, opts, sizeof opts / sizeof opts[0]) != 0 || n < 3 ||
      n > 100000000) {
    fprintf(stderr, "usage: %s [-n rows (at least 3)]\n", argv[0]);
    return 2;
  }
  // What the checks expect, per first letter and in all.
  int64_t rows_by_letter[26] = {0}, text_by_letter[26] = {0};
  int64_t rows_left = 0, blob_left = 0;
  char text[72];
  unsigned char blob[256];
  int ok = 1;
  sqlite3* db = NULL;
  sqlite3_stmt* st = NULL;

  double start = BenchNow();
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) ok = Fail(db, "open");
  ok = ok && Exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL, d BLOB)");
  ok = ok && Exec(db, "BEGIN");
  if (ok &&
      sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2, ?3, ?4)", -1, &st, NULL) != SQLITE_OK)
    ok = Fail(db, "prepare insert");
  for (uint64_t k = 0; k < n && ok; k++) {
    char first;
    int tlen = RowText(k, text, &first);
    int blen = RowBlob(k, blob);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)k);
    sqlite3_bind_text(st, 2, text, tlen, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 3, (double)(k % 1000) * 0.5);
    sqlite3_bind_blob(st, 4, blob, blen, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) ok = Fail(db, "insert");
    sqlite3_reset(st);
    rows_by_letter[first - 'a']++;
    text_by_letter[first - 'a'] += tlen;
    if (k % 3 != 0) {
      rows_left++;
      blob_left += k % 5 == 0 ? 16 : blen;
    }
  }
  sqlite3_finalize(st);
  st = NULL;
  ok = ok && Exec(db, "COMMIT");
  ok = ok && Exec(db, "CREATE INDEX tb ON t(b)");

  // The GROUP BY, through the index: rows and text bytes per first letter.
  if (ok && sqlite3_prepare_v2(db,
                               "SELECT substr(b, 1, 1), count(*), sum(length(b)) FROM t "
                               "INDEXED BY tb WHERE b >= '' GROUP BY 1",
                               -1, &st, NULL) != SQLITE_OK)
    ok = Fail(db, "prepare group by");
  int letters = 0, rc = SQLITE_DONE;
  while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char* l = sqlite3_column_text(st, 0);
    int i = l != NULL ? l[0] - 'a' : -1;
    if (i < 0 || i >= 26 || sqlite3_column_int64(st, 1) != rows_by_letter[i] ||
        sqlite3_column_int64(st, 2) != text_by_letter[i]) {
      fprintf(stderr, "%s: group '%s' does not match the rows inserted\n", kProg,
              l != NULL ? (const char*)l : "(null)");
      ok = 0;
    }
    letters++;
  }
  if (ok && rc != SQLITE_DONE) ok = Fail(db, "group by");
  sqlite3_finalize(st);
  st = NULL;
  int letters_expected = 0;
  for (int i = 0; i < 26; i++) letters_expected += rows_by_letter[i] != 0;
  if (ok && letters != letters_expected) {
    fprintf(stderr, "%s: %d groups, expected %d\n", kProg, letters, letters_expected);
    ok = 0;
  }

  ok = ok && Exec(db, "BEGIN");
  ok = ok && Exec(db, "DELETE FROM t WHERE a % 3 = 0");
  ok = ok && Exec(db, "UPDATE t SET d = zeroblob(16) WHERE a % 5 = 0");
  ok = ok && Exec(db, "COMMIT");
  int64_t left = -1, blob_sum = -1;
  ok = ok && QueryInt(db, "SELECT count(*) FROM t", &left) &&
       QueryInt(db, "SELECT total(length(d)) FROM t", &blob_sum);
  if (ok && (left != rows_left || blob_sum != blob_left)) {
    fprintf(stderr, "%s: %lld rows and %lld blob bytes left, expected %lld and %lld\n", kProg,
            (long long)left, (long long)blob_sum, (long long)rows_left, (long long)blob_left);
    ok = 0;
  }
  if (sqlite3_close(db) != SQLITE_OK) ok = Fail(db, "close");
  double seconds = BenchNow() - start;

  printf("bench=sqlite rows=%llu seconds=%.6f rows_per_sec=%.0f", (unsigned long long)n, seconds,
         seconds > 0 ? (double)n / seconds : 0.0);
  BenchReportTail(ok);
  return ok ? 0 : 1;
}
