// SPDX-License-Identifier: GPL-2.0
/*
 * KeyIDs as the "mktme" resource of the misc cgroup controller (cgroup v2):
 * misc.capacity, a limit in misc.max (EDQUOT past it, counted in
 * misc.events) while other cgroups still create keys, misc.current after
 * add, invalidate, munmap and fork, charges that stay behind when the
 * process moves, a KeyID held only by memory staying charged, hierarchical
 * limits, a charged cgroup removed, the empty pool still ENOKEY, and
 * everything uncharged and free at the end.
 *
 * The test moves itself between cgroups under CGROUP_ROOT/mktme-cg-PID,
 * which it makes and removes (at exit too, after a bail out), and ends in
 * the cgroup it started in. It needs 5 free KeyIDs (4 held at once and
 * a fifth that P's limit refuses), and skips when fewer are free.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)
#define LEN (16 * PAGE)
/* Releases are asynchronous: the key garbage collector, then a work item. */
#define UNCHARGE_MS 5000

static char base[64], cg_t[96], cg_u[96], cg_p[96], cg_a[96], cg_b[96];
static char home[512];
static int have_home, cleaned_up;

/* A cpu key named desc-N, in whatever cgroup this process is in now. */
static key_serial_t add_cpu_key(const char *desc, int n)
{
	char name[64];

	snprintf(name, sizeof(name), "cgroup-%s-%d", desc, n);
	return mktme_add(name, CPU_KEY);
}

static long current(const char *path)
{
	return cg_misc(path, "misc.current", "mktme");
}

static long events(const char *path)
{
	return cg_misc(path, "misc.events", "mktme.max");
}

/* Enter cgroup path, or say why not and bail out: nothing else makes sense. */
static void enter(const char *path)
{
	int err = cg_enter(path);

	if (err)
		bail_out("cannot move into cgroup %s: %s", path, strerror(err));
}

static int setup(void)
{
	const char *const order[] = { base, cg_t, cg_u, cg_p, cg_a, cg_b };
	size_t i;
	int err = 0;

	snprintf(base, sizeof(base), "mktme-cg-%d", (int)getpid());
	snprintf(cg_t, sizeof(cg_t), "%s/T", base);
	snprintf(cg_u, sizeof(cg_u), "%s/U", base);
	snprintf(cg_p, sizeof(cg_p), "%s/P", base);
	snprintf(cg_a, sizeof(cg_a), "%s/P/A", base);
	snprintf(cg_b, sizeof(cg_b), "%s/P/B", base);
	for (i = 0; i < ARRAY_SIZE(order) && !err; i++) {
		err = cg_create(order[i]);
		if (err)
			diag("  mkdir %s: %s", order[i], strerror(err));
	}
	return err;
}

/* Remove the test cgroups (deepest first), from the cgroup we came from. */
static int remove_all(void)
{
	const char *const order[] = { cg_b, cg_a, cg_p, cg_u, cg_t, base };
	size_t i;
	int err = 0, e;

	if (have_home)
		cg_enter(home);
	for (i = 0; i < ARRAY_SIZE(order); i++) {
		if (!order[i][0])
			continue;
		e = cg_remove(order[i]);
		if (e && e != ENOENT) {
			diag("  rmdir %s: %s", order[i], strerror(e));
			err = e;
		}
	}
	return err;
}

static void remove_at_exit(void)
{
	if (!cleaned_up)
		remove_all();
}

/* Child of the fork test: keeps the mapping until the parent says so. */
static int hold_mapping(int rfd, const void *p)
{
	char c;

	if (read(rfd, &c, 1) != 1)
		return 2;
	return mismatch(p, LEN, 7) == -1 ? 0 : 1;
}

int main(void)
{
	key_serial_t t[3], u[2], a[2], b[2], pool[4096];
	long nr, start, v, ev_before, ev_base, in_use;
	int fds[2] = { -1, -1 }, status, n, err, i;
	char *mem;
	pid_t pid;

	nr = mktme_sysfs("nr_keyids");
	if (nr >= 0 && nr - settled_keyids_in_use() < 5) {
		printf("1..0 # SKIP fewer than 5 of %ld KeyIDs free: the test needs 5\n",
		       nr);
		return 0;
	}
	plan(1 + 2 + 6 + 3 + 6 + 5 + 2 + 2 + 3);
	require_mktme();
	start = settled_keyids_in_use();

	v = cg_misc("", "misc.capacity", "mktme");
	if (!ok(v == nr, "misc.capacity of the root cgroup: mktme %ld, nr_keyids %ld",
		v, nr))
		bail_out("no mktme resource in " CGROUP_ROOT "/misc.capacity");
	if (cg_current(home, sizeof(home)))
		bail_out("this process is in no cgroup v2 cgroup");
	have_home = 1;
	diag("started in cgroup /%s", home);
	atexit(remove_at_exit);
	if (!ok(!setup(), "cgroups %s/{T,U,P/A,P/B} made, with the misc controller",
		base))
		bail_out("no test cgroups");

	/* A limit of 2 in T; U has none. */
	err = cg_write(cg_t, "misc.max", "mktme 2");
	ok(!err && cg_misc(cg_t, "misc.max", "mktme") == 2,
	   "T: misc.max \"mktme 2\" written and read back");
	enter(cg_t);
	t[0] = add_cpu_key("t", 0);
	t[1] = add_cpu_key("t", 1);
	ok(t[0] > 0 && t[1] > 0, "T: 2 keys created under its limit of 2");
	t[2] = add_cpu_key("t", 2);
	is_errno(t[2], EDQUOT, "T: the third key fails with EDQUOT");
	in_use = mktme_sysfs("keyids_in_use");
	ok(in_use == start + 2,
	   "T: the refused key's KeyID is free again at once (keyids_in_use %ld, %ld + 2)",
	   in_use, start);
	ok(current(cg_t) == 2, "T: misc.current is mktme 2 (%ld)", current(cg_t));
	ok(events(cg_t) == 1, "T: misc.events counts mktme.max 1 (%ld)",
	   events(cg_t));

	/* Another cgroup still gets KeyIDs; T's charges stay in T. */
	enter(cg_u);
	u[0] = add_cpu_key("u", 0);
	ok(u[0] > 0 && current(cg_u) == 1,
	   "U: another cgroup still creates a key (misc.current %ld)",
	   current(cg_u));
	ok(current(cg_t) == 2,
	   "T: the process moved to U, T's 2 charges stay in T (%ld)",
	   current(cg_t));
	err = cg_write(cg_u, "misc.max", "mktme 1");
	u[1] = err ? 0 : add_cpu_key("u", 1);
	is_errno(u[1], EDQUOT, "U: lowered to its usage (mktme 1), the next key fails with EDQUOT");

	/* Invalidating a key uncharges its KeyID once it is back in the pool. */
	keyctl_invalidate(t[0]);
	v = cg_wait_current(cg_t, 1, UNCHARGE_MS);
	ok(v == 1, "T: a key invalidated, misc.current drops to 1 (%ld)", v);

	/*
	 * A KeyID held only by memory stays charged, through a fork. Revoking
	 * drops the key's own reference at once (invalidation leaves it to
	 * the garbage collector, so a check right after would prove nothing).
	 */
	mem = map_anon(LEN, MAP_PRIVATE);
	ok(mem && !encrypt_mprotect(mem, LEN, RW, t[1]),
	   "T's second key encrypts %lu KiB of anonymous memory", LEN >> 10);
	if (mem)
		fill(mem, LEN, 7);
	keyctl_revoke(t[1]);
	settled_keyids_in_use();
	ok(current(cg_t) == 1,
	   "T: its key revoked, the KeyID held by memory stays charged (%ld)",
	   current(cg_t));
	pid = -1;
	if (!pipe(fds)) {
		pid = fork();
		if (pid == 0) {
			close(fds[1]);
			_exit(hold_mapping(fds[0], mem));
		}
		close(fds[0]);
	}
	if (mem)
		munmap(mem, LEN);
	settled_keyids_in_use();
	ok(pid > 0 && current(cg_t) == 1,
	   "T: unmapped in the parent, a forked child's copy keeps it charged (%ld)",
	   current(cg_t));
	status = -1;
	if (pid > 0 && write(fds[1], "x", 1) != 1)
		diag("  cannot tell the child to go on");
	/* Closed before the wait: a child still reading gets EOF, not a hang. */
	if (fds[1] >= 0)
		close(fds[1]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "the child read its copy back intact (status %#x)", status);
	v = cg_wait_current(cg_t, 0, UNCHARGE_MS);
	ok(v == 0, "T: the child exited, misc.current drops to 0 (%ld)", v);

	/* Hierarchy: P's limit of 3 caps A and B together. */
	err = cg_write(cg_p, "misc.max", "mktme 3");
	if (!err)
		err = cg_write(cg_b, "misc.max", "mktme 2");
	ok(!err, "P: misc.max mktme 3, its child B mktme 2, A unlimited");
	enter(cg_a);
	a[0] = add_cpu_key("a", 0);
	a[1] = add_cpu_key("a", 1);
	enter(cg_b);
	b[0] = add_cpu_key("b", 0);
	ok(a[0] > 0 && a[1] > 0 && b[0] > 0,
	   "A: 2 keys, B: 1 key, 3 in P");
	ev_before = events(cg_b);
	ev_base = events(base);
	b[1] = add_cpu_key("b", 1);
	is_errno(b[1], EDQUOT,
		 "B: under its own limit of 2, its second key fails with EDQUOT: P is full");
	ok(current(cg_p) == 3 && current(cg_a) == 2 && current(cg_b) == 1,
	   "misc.current: P %ld = A %ld + B %ld", current(cg_p),
	   current(cg_a), current(cg_b));
	ok(events(cg_p) == 1 && events(base) == ev_base + 1 &&
	   events(cg_b) == ev_before,
	   "misc.events: mktme.max counted in P, whose limit it was (%ld), and its parent (%ld, was %ld), not in B (%ld)",
	   events(cg_p), events(base), ev_base, events(cg_b));

	/* A cgroup with charges can go once empty; its charges stay in P. */
	enter(cg_u);
	err = cg_remove(cg_a);
	ok(!err && current(cg_p) == 3,
	   "A removed with 2 KeyIDs charged: rmdir %s, P still mktme %ld",
	   err ? strerror(err) : "succeeds", current(cg_p));
	keyctl_invalidate(a[0]);
	keyctl_invalidate(a[1]);
	v = cg_wait_current(cg_p, 1, UNCHARGE_MS);
	ok(v == 1, "A's keys invalidated: their charges leave P (%ld)", v);

	/* An empty pool is ENOKEY, not EDQUOT, in a cgroup with no limit. */
	err = cg_write(cg_u, "misc.max", "mktme max");
	if (err)
		diag("  U: misc.max \"mktme max\": %s", strerror(err));
	ev_before = events(cg_u);
	for (n = 0; !err && n < (int)ARRAY_SIZE(pool); n++) {
		pool[n] = add_cpu_key("pool", n);
		if (pool[n] == -1)
			break;
	}
	is_errno(!err && n < (int)ARRAY_SIZE(pool) ? pool[n] : 0, ENOKEY,
		 "U, no limit: the pool runs out after %d more keys with ENOKEY",
		 n);
	in_use = mktme_sysfs("keyids_in_use");
	ok(in_use == nr && events(cg_u) == ev_before,
	   "keyids_in_use is nr_keyids (%ld), misc.events of U unchanged",
	   in_use);
	for (i = 0; i < n; i++)
		keyctl_invalidate(pool[i]);

	/* Everything ends: every cgroup back to 0, every KeyID free. */
	keyctl_invalidate(u[0]);
	keyctl_invalidate(b[0]);
	enter(home);
	v = wait_keyids_in_use(start, 10000);
	ok(v == start, "every key invalidated: keyids_in_use back to %ld (%ld)",
	   start, v);
	ok(current(base) == 0 && current(cg_t) == 0 && current(cg_u) == 0 &&
	   current(cg_p) == 0 && current(cg_b) == 0,
	   "misc.current: %s %ld, T %ld, U %ld, P %ld, B %ld", base,
	   current(base), current(cg_t), current(cg_u), current(cg_p),
	   current(cg_b));
	ok(!remove_all(), "the test cgroups removed, back in /%s", home);
	cleaned_up = 1;
	return done();
}
