/*
 * The demonstration program of the MKTME API documentation
 * (Documentation/x86/mktme/mktme_demo.rst in the seed series), as it is
 * there, with two changes so that it builds with -Wall -Wextra -Werror:
 *   - "void main(void)" is "int main(void)" (gcc: -Werror=main), and
 *   - so its bare "return;" after "addkey FAILED" is "return 1;"
 *     (-Werror=return-type); falling off the end of main returns 0.
 * Its includes were already complete. Everything else is unchanged,
 * including its check of mmap() against NULL instead of MAP_FAILED (a bug
 * of the seed's demo that design.md records): debian/tests/mktme-api
 * only checks that it exits 0 and prints no failure.
 */
/* Compile with the keyutils library: cc -o mdemo mdemo.c -lkeyutils */

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <keyutils.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PAGE_SIZE sysconf(_SC_PAGE_SIZE)
#define sys_encrypt_mprotect 335

int main(void)
{
	char *options_CPU = "algorithm=aes-xts-128 type=cpu";
	long size = PAGE_SIZE;
        key_serial_t key;
	void *ptra;
	int ret;

        /* Allocate an MKTME Key */
	key = add_key("mktme", "testkey", options_CPU, strlen(options_CPU),
                      KEY_SPEC_THREAD_KEYRING);

	if (key == -1) {
		printf("addkey FAILED\n");
		return 1;
	}
        /* Map a page of ANONYMOUS memory */
	ptra = mmap(NULL, size, PROT_NONE, MAP_ANONYMOUS|MAP_PRIVATE, -1, 0);
	if (!ptra) {
		printf("failed to mmap");
		goto inval_key;
	}
        /* Encrypt that page of memory with the MKTME Key */
	ret = syscall(sys_encrypt_mprotect, ptra, size, PROT_NONE, key);
	if (ret)
		printf("mprotect error [%d]\n", ret);

        /* Enjoy that page of encrypted memory */

        /* Free the memory */
	ret = munmap(ptra, size);

inval_key:
        /* Free the Key */
	if (keyctl(KEYCTL_INVALIDATE, key) == -1)
		printf("invalidate failed on key [%d]\n", key);
}
