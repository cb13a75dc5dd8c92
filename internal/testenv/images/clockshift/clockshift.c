// clockshift is an LD_PRELOAD library that moves a process's wall clock,
// for tests: CLOCK_REALTIME (and its coarse form), gettimeofday and time
// read the system's clock shifted as the file named by LOCKER_CLOCK_FILE
// says, re-read at every call, so a test changes a running server's clock
// by rewriting the file. The monotonic clocks are left alone, as a real
// clock step leaves them.
//
// The file holds three decimal integers: an offset in ns, a rate in parts
// per million, and a base time in ns (the system's wall clock when the rate
// was set). The clock reads  t + offset + (t - base) * rate / 10^6  for the
// system's t. Without the variable, or while the file cannot be read, the
// clock is the system's.
//
// No call here allocates: an allocator that reads the clock (Redis's
// jemalloc does, at start) would otherwise recurse into it, which is what
// keeps libfaketime from running Redis.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int fd = -2; // -2: not opened yet; -1: no file

// parse reads the three integers of buf; 0 if they are not all there.
static int parse(const char *buf, long n, int64_t v[3]) {
	long i = 0;
	for (int k = 0; k < 3; k++) {
		while (i < n && (buf[i] == ' ' || buf[i] == '\n')) i++;
		int neg = 0;
		if (i < n && buf[i] == '-') { neg = 1; i++; }
		if (i >= n || buf[i] < '0' || buf[i] > '9') return 0;
		int64_t x = 0;
		while (i < n && buf[i] >= '0' && buf[i] <= '9') x = x * 10 + (buf[i++] - '0');
		v[k] = neg ? -x : x;
	}
	return 1;
}

// shift returns how far the wall clock is moved at system time t (ns).
static int64_t shift(int64_t t) {
	if (fd == -2) {
		const char *path = getenv("LOCKER_CLOCK_FILE");
		fd = path ? (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC) : -1;
		if (fd < 0) fd = -1;
	}
	if (fd < 0) return 0;
	// A read may see a rewrite half done: read until two agree.
	char a[128], b[128];
	int64_t va[3], vb[3];
	for (int tries = 0; tries < 8; tries++) {
		long na = syscall(SYS_pread64, fd, a, sizeof a, 0);
		long nb = syscall(SYS_pread64, fd, b, sizeof b, 0);
		if (na <= 0 || nb <= 0 || !parse(a, na, va) || !parse(b, nb, vb)) continue;
		if (va[0] != vb[0] || va[1] != vb[1] || va[2] != vb[2]) continue;
		int64_t s = va[0];
		if (va[1] != 0 && t > va[2]) s += (t - va[2]) / 1000000 * va[1] + (t - va[2]) % 1000000 * va[1] / 1000000;
		return s;
	}
	return 0;
}

static int realtime(clockid_t id) { return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE; }

int clock_gettime(clockid_t id, struct timespec *ts) {
	long r = syscall(SYS_clock_gettime, id, ts);
	if (r == 0 && realtime(id)) {
		int64_t t = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
		t += shift(t);
		ts->tv_sec = t / 1000000000;
		ts->tv_nsec = t % 1000000000;
		if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000; ts->tv_sec--; }
	}
	return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0) { // tv is never NULL here: glibc declares it nonnull
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *out) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (out) *out = ts.tv_sec;
	return ts.tv_sec;
}
