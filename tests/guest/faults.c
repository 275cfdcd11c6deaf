// SPDX-License-Identifier: GPL-2.0
/*
 * The guest half of tests/vm/faults.bash, in the boot of tests/vm/mm.sh:
 * add_key of a cpu key while the host makes PCONFIG fail (QMP
 * x-mktme-inject-pconfig-error). Needs root; TAP on stdout.
 *
 * It prints "faults: keyids_in_use N", then pauses ("faults: pause NAME",
 * and waits for a line on stdin, the host's "go" through ssh, for up to
 * 120 s) before each step. The kernel tries a PCONFIG that fails with an
 * entropy error or device busy 5 times, and undoes what the other
 * packages got when one still fails:
 *
 *   entropy  the host made package 0's next 5 PCONFIGs fail (entropy
 *            error): add_key fails with ENOKEY, keyids_in_use unchanged
 *   busy     the same on package 1 (device busy): package 0 was programmed
 *            and is cleared again; ENOKEY, keyids_in_use unchanged
 *   retry    one failure on each package: the retries make add_key
 *            succeed, keyids_in_use + 1; a page encrypted with the key
 *            reads back ("region cpu keyid=K")
 *   update   package 1 fails 5 times again: keyctl update of the key fails
 *            with ENOKEY; package 0 got a new random key and no command
 *            gives the old one back, so the KeyID is cleared everywhere
 *            and the key rejected: encrypt_mprotect() fails with
 *            EKEYREJECTED
 *   rejected the host sees the KeyID cleared on both packages; then an
 *            update succeeds and the key encrypts memory again
 *   done     the host sees the KeyID random on both packages, each with a
 *            key of its own
 */
#include <sys/mman.h>
#include <unistd.h>

#include "mktme.h"

/* add_key must fail with ENOKEY and leave keyids_in_use at n0. */
static void add_fails(const char *why, long n0)
{
	key_serial_t key = mktme_add(why, CPU_KEY);
	long now;

	if (!is_errno(key, ENOKEY, "%s: add_key of a cpu key fails with ENOKEY", why))
		keyctl_invalidate(key);
	now = settled_keyids_in_use();
	ok(now == n0, "%s: keyids_in_use stays %ld (%ld): the KeyID went back",
	   why, n0, now);
}

int main(void)
{
	key_serial_t key;
	long n0, now, keyid = -1;
	char *p;

	plan(12);
	require_mktme();
	n0 = settled_keyids_in_use();
	printf("faults: keyids_in_use %ld\n", n0);

	pause_for_host("faults", "entropy");
	add_fails("entropy error on package 0", n0);
	pause_for_host("faults", "busy");
	add_fails("device busy on package 1", n0);

	pause_for_host("faults", "retry");
	key = mktme_add("retry", CPU_KEY);
	if (!ok(key != -1, "one failure on each package: add_key succeeds on a retry"))
		diag("add_key: %s", strerror(errno));
	now = settled_keyids_in_use();
	ok(now == n0 + 1, "keyids_in_use %ld -> %ld", n0, now);
	p = map_anon(PAGE, MAP_PRIVATE);
	if (p && key != -1 &&
	    !encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key)) {
		fill(p, PAGE, 5);
		keyid = keyid_of(p);
	}
	ok(keyid > 0 && mismatch(p, PAGE, 5) == -1,
	   "a page encrypted with the key (KeyID %ld) reads back", keyid);
	printf("region cpu keyid=%ld\n", keyid);
	if (p)
		munmap(p, PAGE);

	pause_for_host("faults", "update");
	is_errno(keyctl_update(key, CPU_KEY, strlen(CPU_KEY)), ENOKEY,
		 "update while package 1 keeps failing: ENOKEY");
	p = map_anon(PAGE, MAP_PRIVATE);
	is_errno(p ? encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key) : -1,
		 EKEYREJECTED,
		 "... and the key is rejected (a cpu key cannot be given back): encrypt_mprotect() fails with EKEYREJECTED");

	pause_for_host("faults", "rejected");
	ok(!keyctl_update(key, CPU_KEY, strlen(CPU_KEY)),
	   "an update without failures succeeds (%s)", strerror(errno));
	keyid = -1;
	if (p && !encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key)) {
		fill(p, PAGE, 6);
		keyid = keyid_of(p);
	}
	ok(keyid > 0 && mismatch(p, PAGE, 6) == -1,
	   "the key encrypts again: a page (KeyID %ld) reads back", keyid);
	pause_for_host("faults", "done");
	return done();
}
