// LD_PRELOAD library of the crash-safety tests: a disk that fills up mid-run, without root or a small filesystem.
// Once KVCONF_FAIL_WRITES_AFTER bytes have gone to regular files through write(), the write that crosses the budget
// is cut short and every later one fails with ENOSPC (KVCONF_FAIL_WRITES_ERRNO=EROFS|EIO|EDQUOT picks another errno).
// KVCONF_KILL_AT_WRITE=N: the N-th write() to a regular file writes half its bytes, then the process SIGKILLs itself
// (a kill -9 that lands inside a write). KVCONF_COUNT_WRITES_TO=FILE: at exit, the number of such writes goes there.
// Terminals, pipes and the standard streams (fd 0-2) are never failed or counted. Unset: write() is untouched.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void*, size_t);
static long long budget = -2;  // -2: not read yet, -1: no budget (the variable is unset)
static int fail_errno = ENOSPC;
static long long written;       // bytes written to regular files so far (all threads)
static long long kill_at = -1;  // KVCONF_KILL_AT_WRITE
static long long writes;        // write() calls on regular files so far

static void read_settings(void) {
  const char* b = getenv("KVCONF_FAIL_WRITES_AFTER");
  const char* e = getenv("KVCONF_FAIL_WRITES_ERRNO");
  if (e && strcmp(e, "EROFS") == 0) fail_errno = EROFS;
  if (e && strcmp(e, "EIO") == 0) fail_errno = EIO;
  if (e && strcmp(e, "EDQUOT") == 0) fail_errno = EDQUOT;
  const char* k = getenv("KVCONF_KILL_AT_WRITE");
  kill_at = k && *k ? atoll(k) : -1;
  if (kill_at > 0 && !(b && *b)) b = "9223372036854775807";  // counting needs the budget path
  if (getenv("KVCONF_COUNT_WRITES_TO") && !(b && *b)) b = "9223372036854775807";
  __atomic_store_n(&budget, b && *b ? atoll(b) : -1, __ATOMIC_RELEASE);
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (!real_write) real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  if (__atomic_load_n(&budget, __ATOMIC_ACQUIRE) == -2) read_settings();
  struct stat st;
  if (budget < 0 || fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return real_write(fd, buf, n);
  if (__atomic_add_fetch(&writes, 1, __ATOMIC_ACQ_REL) == kill_at) {
    if (n > 1) real_write(fd, buf, n / 2);
    kill(getpid(), SIGKILL);
  }
  const long long left = budget - __atomic_load_n(&written, __ATOMIC_ACQUIRE);
  if (left <= 0) {
    errno = fail_errno;
    return -1;
  }
  if ((long long)n > left) n = (size_t)left;
  const ssize_t w = real_write(fd, buf, n);
  if (w > 0) __atomic_fetch_add(&written, (long long)w, __ATOMIC_ACQ_REL);
  return w;
}

__attribute__((destructor)) static void report_count(void) {
  const char* f = getenv("KVCONF_COUNT_WRITES_TO");
  if (!f || !*f) return;
  FILE* out = fopen(f, "w");
  if (!out) return;
  fprintf(out, "%lld\n", __atomic_load_n(&writes, __ATOMIC_ACQUIRE));
  fclose(out);
}
