// SPDX-License-Identifier: GPL-2.0
/*
 * kexec with KeyIDs in use, the guest half of tests/vm/kexec.sh:
 *
 *   kexec load KERNEL INITRD   encrypt memory under two keys and keep it,
 *                              in a process left running, then load
 *                              KERNEL and INITRD with kexec_file_load()
 *                              and the running kernel's command line
 *   kexec exec                 sync, then reboot(LINUX_REBOOT_CMD_KEXEC):
 *                              into the loaded kernel at once, with the
 *                              writer of "load" still running
 *   kexec check                in the kernel kexec'd into: MKTME is there
 *                              with no KeyID in use, and memory encrypts
 *                              and reads back under new keys
 *
 * The host runs "kexec exec" between the two (vm/run --reboot-with), not
 * "systemctl kexec": systemd-shutdown would kill the writer first, and
 * its memory, freed, would be flushed.  So the old kernel goes down with
 * encrypted memory mapped and being written: its caches hold dirty lines
 * of that memory under its KeyIDs, which must be written back before the
 * new kernel reuses the memory (the model's cache checker, strict in
 * every vm/run, ends the run if they are not).
 */
#include <fcntl.h>
#include <linux/reboot.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mktme.h"

#define LEN (4UL << 20)
#define RW (PROT_READ | PROT_WRITE)

static uint8_t *encrypted_pattern(const char *desc, unsigned int seed)
{
	key_serial_t key = mktme_add(desc, CPU_KEY);
	uint8_t *p = map_anon(LEN, MAP_PRIVATE);

	if (key == -1 || !p || encrypt_mprotect(p, LEN, RW, key))
		bail_out("%s: key %d, map %p: %s", desc, key, p, strerror(errno));
	fill(p, LEN, seed);
	return p;
}

static int load(const char *kernel, const char *initrd)
{
	char cmdline[4096] = "";
	int kfd, ifd, holder[2], rc;
	FILE *f;
	char c;
	pid_t pid;

	plan(1 + 2 + 1);
	require_mktme();

	/*
	 * A child that holds the encrypted memory, dirty, until the kernel
	 * goes down: it outlives this ssh session (its own session, no
	 * terminal) and tells us once its memory is ready.
	 */
	if (pipe(holder))
		bail_out("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bail_out("fork: %s", strerror(errno));
	if (!pid) {
		uint8_t *a, *b;
		unsigned int round;

		/* Off ssh's channel, which stays open while a writer is left. */
		setsid();
		signal(SIGHUP, SIG_IGN);
		if (!freopen("/dev/null", "r", stdin) ||
		    !freopen("/dev/null", "w", stdout) ||
		    !freopen("/dev/null", "w", stderr))
			_exit(1);
		a = encrypted_pattern("kexec-a", 1);
		b = encrypted_pattern("kexec-b", 2);
		if (write(holder[1], "r", 1) != 1)
			_exit(1);
		close(holder[1]);
		/* Keep writing through both KeyIDs until the end. */
		for (round = 3;; round++) {
			fill(a, LEN, round);
			fill(b, LEN, round + 1);
			usleep(10000);
		}
	}
	close(holder[1]);
	ok(read(holder[0], &c, 1) == 1 && c == 'r',
	   "a process (pid %d) holds 2 x %lu MiB encrypted under two keys, and writes it",
	   pid, LEN >> 20);
	ok(settled_keyids_in_use() >= 2, "2 KeyIDs in use before kexec (%ld)",
	   settled_keyids_in_use());

	f = fopen("/proc/cmdline", "r");
	if (!f || !fgets(cmdline, sizeof(cmdline), f))
		bail_out("/proc/cmdline: %s", strerror(errno));
	fclose(f);
	cmdline[strcspn(cmdline, "\n")] = 0;
	kfd = open(kernel, O_RDONLY);
	ifd = open(initrd, O_RDONLY);
	if (kfd < 0 || ifd < 0)
		bail_out("%s, %s: %s", kernel, initrd, strerror(errno));
	rc = syscall(SYS_kexec_file_load, kfd, ifd, strlen(cmdline) + 1, cmdline, 0UL);
	ok(!rc, "kexec_file_load(%s, %s, \"%s\"): %s", kernel, initrd, cmdline,
	   rc ? strerror(errno) : "loaded");
	return done();
}

static int check(void)
{
	uint8_t *p;

	plan(1 + 2 + 1);
	require_mktme();
	ok(settled_keyids_in_use() == 0, "no KeyID in use after kexec (%ld)",
	   settled_keyids_in_use());
	p = encrypted_pattern("kexec-after", 7);
	ok(mismatch(p, LEN, 7) == -1, "%lu MiB encrypted under a new key read back",
	   LEN >> 20);
	ok(keyid_of(p) > 0, "its KeyID in smaps: %ld", keyid_of(p));
	return done();
}

/* Returns only on failure: the loaded kernel runs instead. */
static int exec_loaded(void)
{
	sync();
	syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
		LINUX_REBOOT_CMD_KEXEC, NULL);
	fprintf(stderr, "reboot(LINUX_REBOOT_CMD_KEXEC): %s\n", strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "load"))
		return load(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "exec"))
		return exec_loaded();
	if (argc == 2 && !strcmp(argv[1], "check"))
		return check();
	fprintf(stderr, "usage: kexec load KERNEL INITRD | kexec exec | kexec check\n");
	return 2;
}
