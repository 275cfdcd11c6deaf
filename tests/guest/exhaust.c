// SPDX-License-Identifier: GPL-2.0
/*
 * The KeyID pool: keys take KeyIDs until add_key() gives ENOKEY; a KeyID
 * comes back when its key is gone and no memory (of any process) uses it.
 * Twice, so that a second round finds the pool whole again.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mktme.h"

#define MAX_KEYS 4096
#define RW (PROT_READ | PROT_WRITE)

static key_serial_t keys[MAX_KEYS];
static long nr, before;

/* Add cpu keys until add_key() fails (at most nr + 1 tries). */
static int take_all(int round)
{
	int n = 0, err = 0;
	char desc[32];
	key_serial_t k;

	while (n <= nr && n < MAX_KEYS) {
		/*
		 * A description of its own for each: add_key() with one that
		 * the keyring already has updates that key instead.
		 */
		snprintf(desc, sizeof(desc), "exhaust-%d-%d", round, n);
		k = mktme_add(desc, CPU_KEY);
		if (k == -1) {
			err = errno;
			break;
		}
		keys[n++] = k;
	}
	if (!ok(err == ENOKEY && n <= nr,
		"round %d: add_key gives ENOKEY after %d keys", round, n))
		diag("  add_key %d: %s", n + 1, err ? strerror(err) : "no error");
	ok(n == nr - before, "round %d: that is the %ld free KeyIDs", round,
	   nr - before);
	ok(mktme_sysfs("keyids_in_use") == nr,
	   "round %d: keyids_in_use is nr_keyids (%ld)", round,
	   mktme_sysfs("keyids_in_use"));
	return n;
}

static void invalidate_all(int n)
{
	int i;

	for (i = 0; i < n; i++)
		keyctl_invalidate(keys[i]);
}

/*
 * Memory of keys[0] in this process and in a child; all keys invalidated:
 * the KeyID stays in use until the last process unmaps the memory.
 */
static void held_by_memory(int n)
{
	char *p = map_anon(PAGE, MAP_PRIVATE), c = 0;
	int c2p[2], p2c[2], status = -1;
	long now;
	pid_t pid;

	if (!p || encrypt_mprotect(p, PAGE, RW, keys[0]) || pipe(c2p) || pipe(p2c))
		bail_out("encrypted page: %s", strerror(errno));
	fill(p, PAGE, 1);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (write(c2p[1], "r", 1) != 1 || read(p2c[0], &c, 1) != 1)
			_exit(2);
		_exit(mismatch(p, PAGE, 1) != -1);
	}
	if (read(c2p[0], &c, 1) != 1)
		diag("the child did not start");

	invalidate_all(n);
	ok(wait_keyids_in_use(before + 1, 10000) == before + 1,
	   "keys invalidated: keyids_in_use falls to %ld + the KeyID memory holds",
	   before);
	ok(mismatch(p, PAGE, 1) == -1, "that memory still reads back");
	munmap(p, PAGE);
	ok(wait_keyids_in_use(before, 1000) == before + 1,
	   "unmapped in the parent: still in use, the child maps it");
	if (write(p2c[1], "x", 1) != 1 || waitpid(pid, &status, 0) != pid)
		status = -1;
	ok(status == 0, "the child reads its data back and exits");
	now = wait_keyids_in_use(before, 10000);
	ok(now == before, "the last user gone: keyids_in_use is back to %ld (%ld)",
	   before, now);
}

int main(void)
{
	int n1, n2;
	long now;

	plan(1 + 1 + 3 + 5 + 3 + 2);
	require_mktme();
	nr = mktme_sysfs("nr_keyids");
	before = settled_keyids_in_use();
	ok(before >= 0 && before < nr, "keyids_in_use %ld of nr_keyids %ld",
	   before, nr);

	n1 = take_all(1);
	held_by_memory(n1);

	n2 = take_all(2);
	ok(n2 == n1, "round 2 takes as many keys as round 1 (%d, %d)", n2, n1);
	invalidate_all(n2);
	now = wait_keyids_in_use(before, 10000);
	ok(now == before, "round 2 invalidated: keyids_in_use is back to %ld (%ld)",
	   before, now);
	return done();
}
