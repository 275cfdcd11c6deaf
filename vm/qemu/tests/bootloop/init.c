/*
 * /init for vm/qemu/bootloop: make the guest kernel patch its own text
 * while other vCPUs run the patched sites, then power off.
 *
 * Static keys are rewritten by text_poke_bp(): an int3 on the first byte,
 * the tail, then the first byte again, with the other CPUs free to execute
 * the site meanwhile.  Under MTTCG a vCPU that translates a site while
 * another vCPU patches it may keep a translation of the old bytes (QEMU
 * before 8.1 read guest code before locking the page).  Boot alone patches
 * a few hundred sites once; toggling sched_schedstats (sites in the
 * scheduler, run at every context switch) and the sched_switch tracepoint
 * while one busy child per CPU switches context makes the same race happen
 * thousands of times per boot.
 *
 * bootloop.toggles=N on the kernel command line sets the number of
 * toggles (default 200).  Prints "BOOTLOOP done" before powering off.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CHILDREN 16

static long cmdline_long(const char *name, long def)
{
	char buf[4096];
	char *p;
	ssize_t n;
	int fd;

	fd = open("/proc/cmdline", O_RDONLY);
	if (fd < 0)
		return def;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return def;
	buf[n] = '\0';
	p = strstr(buf, name);
	if (!p)
		return def;
	return strtol(p + strlen(name), NULL, 10);
}

/* 1 if the write of @val to @path took, 0 if the file is missing. */
static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val);
}

/* Switch context as fast as possible: through schedstats and sched_switch. */
static void busy_child(int cpu)
{
	cpu_set_t set;
	int pfd[2];
	char c = 0;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	if (pipe(pfd))
		_exit(1);
	for (;;) {
		sched_yield();
		if (write(pfd[1], &c, 1) != 1 || read(pfd[0], &c, 1) != 1)
			_exit(1);
		usleep(50);
	}
}

int main(void)
{
	pid_t children[MAX_CHILDREN];
	int nchildren = 0, schedstats, tracepoint = 0;
	long toggles, i, ncpus;

	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	toggles = cmdline_long("bootloop.toggles=", 200);
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus > MAX_CHILDREN)
		ncpus = MAX_CHILDREN;
	printf("BOOTLOOP init: %ld CPUs, %ld toggles\n", ncpus, toggles);
	fflush(stdout);

	for (i = 0; i < ncpus; i++) {
		pid_t pid = fork();

		if (pid == 0)
			busy_child((int)i);
		if (pid > 0)
			children[nchildren++] = pid;
	}

	schedstats = write_str("/proc/sys/kernel/sched_schedstats", "0");
	for (i = 0; i < toggles; i++) {
		const char *val = (i & 1) ? "0" : "1";

		if (schedstats)
			write_str("/proc/sys/kernel/sched_schedstats", val);
		tracepoint |= write_str("/sys/kernel/tracing/events/sched/sched_switch/enable",
					val);
	}
	printf("BOOTLOOP done: sched_schedstats %s, sched_switch tracepoint %s\n",
	       schedstats ? "toggled" : "missing", tracepoint ? "toggled" : "missing");
	fflush(stdout);

	for (i = 0; i < nchildren; i++)
		kill(children[i], SIGKILL);
	while (wait(NULL) > 0)
		;
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
