// SPDX-License-Identifier: GPL-2.0
/*
 * The guest half of tests/vm/algorithms.sh: keys of each encryption
 * algorithm on a model configured with some of them activated
 * (MKTME_ALGORITHMS). Needs root. TAP on stdout.
 *
 * For each of aes-xts-128 and aes-xts-256:
 *   activated      a user key with key= and tweak= chosen here and a cpu
 *                  key each encrypt a page, filled with a known pattern;
 *                  for the host it prints
 *                    xts NAME alg=ALG key=HEX tweak=HEX pa=0x... seed=S
 *                  (the host computes the ciphertext with openssl and
 *                  compares RAM) and, for the cpu key, a "region" line
 *                  of tests/vm/hosted.bash (its pattern must not be in
 *                  RAM, its KeyID alias reads as the pattern)
 *   not activated  add_key of a user and of a cpu key of it fails with
 *                  EINVAL
 * then pauses ("algorithms: pause ram") until the host is done.
 */
#include <sys/mman.h>

#include "mktme.h"

#define SEED_USER(a) (40 + (a))
#define SEED_CPU(a) (50 + (a))

static char *pages[2 * ALG_NR];
static int nr_pages;

/* A page encrypted with a new key of payload, filled with seed; or NULL. */
static char *encrypted_page(const char *desc, const char *payload,
			    unsigned int seed, long *keyid)
{
	key_serial_t key = mktme_add(desc, payload);
	char *p = map_anon(PAGE, MAP_PRIVATE);

	*keyid = -1;
	if (key == -1 || !p ||
	    encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key)) {
		diag("%s: key %d, map %p: %s", desc, key, p, strerror(errno));
		return NULL;
	}
	fill(p, PAGE, seed);
	*keyid = keyid_of(p);
	pages[nr_pages++] = p;
	return p;
}

static void activated(int a)
{
	char user[256], cpu[64], desc[32];
	long keyid;
	char *p;

	snprintf(user, sizeof(user), "type=user algorithm=%s key=%.*s tweak=%.*s",
		 alg_names[a], alg_digits[a], HEX64, alg_digits[a], HEX64_B);
	snprintf(cpu, sizeof(cpu), "type=cpu algorithm=%s", alg_names[a]);

	snprintf(desc, sizeof(desc), "user-%s", alg_names[a]);
	p = encrypted_page(desc, user, SEED_USER(a), &keyid);
	if (ok(p && keyid > 0 && mismatch(p, PAGE, SEED_USER(a)) == -1,
	       "%s: a user key with a %d-bit key encrypts a page (KeyID %ld) that reads back",
	       alg_names[a], alg_digits[a] * 4, keyid))
		printf("xts %s alg=%s key=%.*s tweak=%.*s pa=0x%llx seed=%d\n",
		       desc, alg_names[a], alg_digits[a], HEX64, alg_digits[a],
		       HEX64_B, (unsigned long long)phys_addr(p), SEED_USER(a));

	snprintf(desc, sizeof(desc), "cpu-%s", alg_names[a]);
	p = encrypted_page(desc, cpu, SEED_CPU(a), &keyid);
	if (ok(p && keyid > 0 && mismatch(p, PAGE, SEED_CPU(a)) == -1,
	       "%s: a cpu key encrypts a page (KeyID %ld) that reads back",
	       alg_names[a], keyid))
		printf("region %s kind=cpu pa=0x%llx keyid=%ld seed=%d page=0\n",
		       desc, (unsigned long long)phys_addr(p), keyid, SEED_CPU(a));
}

static void not_activated(int a)
{
	char user[256], cpu[64];

	snprintf(user, sizeof(user), "type=user algorithm=%s key=%.*s tweak=%.*s",
		 alg_names[a], alg_digits[a], HEX64, alg_digits[a], HEX64_B);
	snprintf(cpu, sizeof(cpu), "type=cpu algorithm=%s", alg_names[a]);
	is_errno(mktme_add("refused-user", user), EINVAL,
		 "%s is not activated (%s): add_key of a user key fails with EINVAL",
		 alg_names[a], mktme_algorithms_text());
	is_errno(mktme_add("refused-cpu", cpu), EINVAL,
		 "%s: ... and of a cpu key", alg_names[a]);
}

int main(void)
{
	int a, n;

	plan(2 + 2 * ALG_NR);
	require_mktme();
	n = 0;
	for (a = 0; a < ALG_NR; a++)
		n += alg_active(a);
	ok(n > 0, "activated here: %s", mktme_algorithms_text());
	for (a = 0; a < ALG_NR; a++) {
		if (alg_active(a))
			activated(a);
		else
			not_activated(a);
	}
	pause_for_host("algorithms", "ram");
	while (nr_pages--)
		munmap(pages[nr_pages], PAGE);
	return done();
}
