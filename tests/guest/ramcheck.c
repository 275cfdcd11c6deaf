// SPDX-License-Identifier: GPL-2.0
/*
 * The guest half of tests/vm/ram.sh: three locked pages, encrypted with a
 * cpu key, with a no-encrypt key, and plain, each filled with its own
 * pattern (fill() seeds 1, 2, 3). Prints for each
 *
 *   region NAME pa=0x... keyid=K seed=S
 *
 * (pa: the KeyID-0 physical address, from /proc/self/pagemap), then
 * "ramcheck: ready", and sleeps 20 s while the host reads guest RAM. Then
 * it prints the addresses again ("after NAME pa=0x..."), checks that each
 * page still holds its pattern and exits 0 if so. Needs root.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mktme.h"

struct region {
	const char *name, *payload;
	char *p;
};

static struct region regions[] = {
	{ "cpu", CPU_KEY, NULL },
	{ "noenc", "type=no-encrypt", NULL },
	{ "plain", NULL, NULL },
};

int main(void)
{
	struct region *r;
	unsigned int i, bad = 0;
	key_serial_t key;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ARRAY_SIZE(regions); i++) {
		r = &regions[i];
		r->p = map_anon(PAGE, MAP_PRIVATE);
		if (!r->p)
			bail_out("mmap: %s", strerror(errno));
		if (r->payload) {
			key = mktme_add(r->name, r->payload);
			if (key == -1 ||
			    encrypt_mprotect(r->p, PAGE, PROT_READ | PROT_WRITE, key))
				bail_out("%s key: %s", r->name, strerror(errno));
		}
		fill(r->p, PAGE, i + 1);
		if (mlock(r->p, PAGE))
			bail_out("mlock: %s", strerror(errno));
		printf("region %s pa=0x%llx keyid=%ld seed=%u\n", r->name,
		       (unsigned long long)phys_addr(r->p), keyid_of(r->p), i + 1);
	}
	printf("ramcheck: ready\n");
	sleep(20);
	for (i = 0; i < ARRAY_SIZE(regions); i++) {
		r = &regions[i];
		printf("after %s pa=0x%llx\n", r->name,
		       (unsigned long long)phys_addr(r->p));
		if (mismatch(r->p, PAGE, i + 1) != -1) {
			printf("ramcheck: %s: the pattern changed\n", r->name);
			bad++;
		}
	}
	printf("ramcheck: %s\n", bad ? "FAILED" : "done");
	return bad != 0;
}
