// SPDX-License-Identifier: GPL-2.0
/*
 * System sleep and KeyIDs: a hibernation image would hold encrypted memory
 * as plaintext, and the key tables survive neither hibernation's power
 * cycle nor suspend to RAM, so both are refused (EBUSY) while a KeyID is
 * in use, and work again once none is. Hibernation runs as far as its
 * freezer test (/sys/power/pm_test, CONFIG_PM_DEBUG): processes are frozen
 * and thawed, image memory is allocated and freed, nothing is written or
 * powered off. Suspend to RAM ("deep", ACPI S3) runs as far as its core
 * test: the system core callbacks, where the refusal is, run, and the
 * machine does not sleep.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)
#define REFUSED "x86/mktme: hibernation refused"
#define SLEEP_REFUSED "x86/mktme: system sleep refused"

static int file_has(const char *path, const char *word)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strstr(buf, word) != NULL;
}

/* /dev/kmsg from its end: the records logged from now on. */
static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/* Whether a record logged since kmsg_open() contains TEXT. */
static int kmsg_has(int fd, const char *text)
{
	char rec[8192];
	ssize_t n;
	int found = 0;

	if (fd < 0)
		return 0;
	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;
		if (n <= 0)
			break;
		rec[n] = 0;
		if (strstr(rec, text))
			found = 1;
	}
	close(fd);
	return found;
}

/*
 * Write STATE to /sys/power/state with pm_test at LEVEL, so that the sleep
 * runs only as far as that test; pm_test is "none" again afterwards (it
 * applies to every later sleep). 0 or the errno.
 */
static int sleep_tested(const char *state, const char *level)
{
	int err = sysfs_write("/sys/power/pm_test", level);

	if (!err)
		err = sysfs_write("/sys/power/state", state);
	if (sysfs_write("/sys/power/pm_test", "none"))
		bail_out("cannot set /sys/power/pm_test back to none");
	return err;
}

/* Hibernation as far as the freezer test; 0 or the errno. */
static int hibernate(void)
{
	return sleep_tested("disk", "freezer");
}

/*
 * Suspend to RAM as far as its core test: devices suspended, CPUs taken
 * down, the system core callbacks run (where the refusal is), and back
 * without sleeping. Without pm_test it would really sleep, and nothing
 * would wake the machine.
 */
static int suspend_to_ram(void)
{
	return sleep_tested("mem", "core");
}

int main(void)
{
	long before, total_kib = 0;
	char line[128], size[32], old_size[32] = "", mem_sleep[64] = "";
	key_serial_t key;
	int err, kmsg, can_suspend;
	uint8_t *p;
	FILE *f;

	if (!file_has("/sys/power/state", "disk") ||
	    access("/sys/power/pm_test", W_OK)) {
		printf("1..0 # SKIP no hibernation, or no /sys/power/pm_test (CONFIG_HIBERNATION, CONFIG_PM_DEBUG)\n");
		return 0;
	}
	plan(1 + 8);
	require_mktme();
	f = fopen("/sys/power/mem_sleep", "r");
	if (f) {
		if (!fgets(mem_sleep, sizeof(mem_sleep), f))
			mem_sleep[0] = 0;
		fclose(f);
	}
	can_suspend = strstr(mem_sleep, "[deep]") ||
		      !sysfs_write("/sys/power/mem_sleep", "deep");

	/* No page cache dropped to make room for the image. */
	f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %ld kB", &total_kib) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(size, sizeof(size), "%ld", total_kib * 1024);
	f = fopen("/sys/power/image_size", "r");
	if (f) {
		if (!fgets(old_size, sizeof(old_size), f))
			old_size[0] = 0;
		fclose(f);
	}
	if (sysfs_write("/sys/power/image_size", size))
		bail_out("cannot set /sys/power/image_size");

	before = settled_keyids_in_use();
	key = mktme_add("sleep", CPU_KEY);
	if (key == -1)
		bail_out("add_key of a cpu key: %s", strerror(errno));
	p = map_anon(PAGE, MAP_PRIVATE);
	if (!p || encrypt_mprotect(p, PAGE, RW, key))
		bail_out("encrypt_mprotect: %s", strerror(errno));
	fill(p, PAGE, 7);

	kmsg = kmsg_open();
	err = hibernate();
	ok(err == EBUSY && kmsg_has(kmsg, REFUSED),
	   "KeyIDs in use: hibernation refused with EBUSY (%s), \"%s\" logged",
	   err ? strerror(err) : "no error", REFUSED);
	if (can_suspend) {
		kmsg = kmsg_open();
		err = suspend_to_ram();
		ok(err == EBUSY && kmsg_has(kmsg, SLEEP_REFUSED),
		   "KeyIDs in use: suspend to RAM refused with EBUSY (%s), \"%s\" logged",
		   err ? strerror(err) : "no error", SLEEP_REFUSED);
	} else {
		skip("no \"deep\" in /sys/power/mem_sleep",
		     "KeyIDs in use: suspend to RAM refused");
	}
	ok(mismatch(p, PAGE, 7) == -1,
	   "the encrypted page reads back after the refusals");

	munmap(p, PAGE);
	keyctl_invalidate(key);
	ok(wait_keyids_in_use(before, 10000) == before,
	   "KeyIDs in use back to %ld", before);
	if (before) {
		skip("KeyIDs still in use before this test", "no KeyID in use: hibernation goes ahead");
		skip("KeyIDs still in use before this test", "no KeyID in use: suspend to RAM goes ahead");
		skip("KeyIDs still in use before this test", "a key after the hibernation and the suspend");
	} else {
		kmsg = kmsg_open();
		err = hibernate();
		ok(!err && !kmsg_has(kmsg, REFUSED),
		   "no KeyID in use: hibernation goes ahead (%s)",
		   err ? strerror(err) : "freezer test passed");
		if (can_suspend) {
			kmsg = kmsg_open();
			err = suspend_to_ram();
			ok(!err && !kmsg_has(kmsg, SLEEP_REFUSED),
			   "no KeyID in use: suspend to RAM goes ahead (%s)",
			   err ? strerror(err) : "core test passed");
		} else {
			skip("no \"deep\" in /sys/power/mem_sleep",
			     "no KeyID in use: suspend to RAM goes ahead");
		}
		key = mktme_add("sleep-after", CPU_KEY);
		ok(key != -1, "a key after the hibernation and the suspend (%s)",
		   key == -1 ? strerror(errno) : "created");
		if (key != -1)
			keyctl_invalidate(key);
	}
	if (!strstr(mem_sleep, "[deep]") && strstr(mem_sleep, "[s2idle]"))
		sysfs_write("/sys/power/mem_sleep", "s2idle");
	ok(!old_size[0] || !sysfs_write("/sys/power/image_size", old_size),
	   "image_size back to %.*s", (int)strcspn(old_size, "\n"), old_size);
	return done();
}
