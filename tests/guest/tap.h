/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A tiny TAP producer for the in-VM tests.
 *
 *   plan(n); ok(cond, "fmt", ...); is_errno(ret, EINVAL, "fmt", ...);
 *   skip("reason", "fmt", ...); diag("fmt", ...); return done();
 *
 * done() returns the exit status: 0 only when every point passed and the
 * number of points is the plan. bail_out() ends the program at once.
 */
#ifndef TAP_H
#define TAP_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_planned, tap_run, tap_failed;

static inline void plan(int n)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_planned = n;
	printf("1..%d\n", n);
}

static inline void vdiag(const char *fmt, va_list ap)
{
	fputs("# ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
}

__attribute__((format(printf, 1, 2)))
static inline void diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(fmt, ap);
	va_end(ap);
}

static inline int vok(int cond, const char *fmt, va_list ap)
{
	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	vprintf(fmt, ap);
	putchar('\n');
	return cond;
}

/* One test point; returns cond so that callers can add diagnostics. */
__attribute__((format(printf, 2, 3)))
static inline int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cond = vok(cond, fmt, ap);
	va_end(ap);
	return cond;
}

/* ret must be -1 with errno == want; say what happened otherwise. */
__attribute__((format(printf, 3, 4)))
static inline int is_errno(long ret, int want, const char *fmt, ...)
{
	int got = errno;
	int cond = ret == -1 && got == want;
	va_list ap;

	va_start(ap, fmt);
	vok(cond, fmt, ap);
	va_end(ap);
	if (!cond)
		diag("  want -1 (%s), got %ld (%s)", strerror(want), ret,
		     ret == -1 ? strerror(got) : "no error");
	return cond;
}

__attribute__((format(printf, 2, 3)))
static inline void skip(const char *why, const char *fmt, ...)
{
	va_list ap;

	tap_run++;
	printf("ok %d - ", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", why);
}

__attribute__((format(printf, 1, 2), noreturn))
static inline void bail_out(const char *fmt, ...)
{
	va_list ap;

	fputs("Bail out! ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

static inline int done(void)
{
	if (tap_run != tap_planned)
		diag("planned %d tests, ran %d", tap_planned, tap_run);
	if (tap_failed)
		diag("%d of %d tests failed", tap_failed, tap_run);
	return tap_failed || tap_run != tap_planned;
}

#endif
