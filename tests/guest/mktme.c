// SPDX-License-Identifier: GPL-2.0
/* Helpers shared by the MKTME API tests; see mktme.h. */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mktme.h"

#define SYSFS "/sys/kernel/mm/mktme"

long encrypt_mprotect(void *addr, size_t len, int prot, key_serial_t key)
{
	return syscall(SYS_encrypt_mprotect, addr, len, prot, key);
}

key_serial_t mktme_add(const char *desc, const char *payload)
{
	return add_key("mktme", desc, payload, strlen(payload),
		       KEY_SPEC_PROCESS_KEYRING);
}

const char *const alg_names[ALG_NR] = { "aes-xts-128", "aes-xts-256" };
const int alg_digits[ALG_NR] = { 32, 64 };

static unsigned int algorithms;
static char algorithms_text[256];
static pthread_once_t algorithms_once = PTHREAD_ONCE_INIT;

static void read_algorithms(void)
{
	char line[128], *name, *save;
	FILE *f = fopen(MKTME_ALGORITHMS, "r");
	int a;

	if (!f) {
		algorithms = ALG_BIT(ALG_128);
		snprintf(algorithms_text, sizeof(algorithms_text),
			 "%s (no " MKTME_ALGORITHMS ")", alg_names[ALG_128]);
		return;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	snprintf(algorithms_text, sizeof(algorithms_text),
		 "\"%s\" (" MKTME_ALGORITHMS ")", line);
	for (name = strtok_r(line, " \t", &save); name;
	     name = strtok_r(NULL, " \t", &save))
		for (a = 0; a < ALG_NR; a++)
			if (!strcmp(name, alg_names[a]))
				algorithms |= ALG_BIT(a);
}

unsigned int mktme_algorithms(void)
{
	int err = errno;

	pthread_once(&algorithms_once, read_algorithms);
	errno = err;
	return algorithms;
}

const char *mktme_algorithms_text(void)
{
	mktme_algorithms();
	return algorithms_text;
}

int mktme_algorithm(void)
{
	return alg_active(ALG_128) || !alg_active(ALG_256) ? ALG_128 : ALG_256;
}

const char *mktme_cpu_key(void)
{
	static const char *const cpu[ALG_NR] = {
		"type=cpu algorithm=aes-xts-128",
		"type=cpu algorithm=aes-xts-256",
	};

	return cpu[mktme_algorithm()];
}

const char *mktme_user_key(void)
{
	static const char *const user[ALG_NR] = {
		"type=user algorithm=aes-xts-128 key=" HEX32 " tweak=" HEX32_B,
		"type=user algorithm=aes-xts-256 key=" HEX64 " tweak=" HEX64_B,
	};

	return user[mktme_algorithm()];
}

long read_long(const char *path)
{
	long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

long vmstat(const char *name)
{
	size_t n = 0, len = strlen(name);
	char *line = NULL;
	long v = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	while (f && getline(&line, &n, f) > 0) {
		if (!strncmp(line, name, len) && line[len] == ' ') {
			v = strtol(line + len + 1, NULL, 10);
			break;
		}
	}
	free(line);
	if (f)
		fclose(f);
	return v;
}

int pin_cpu(cpu_set_t *old, const char *what)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (!sched_getaffinity(0, sizeof(*old), old) &&
	    !sched_setaffinity(0, sizeof(one), &one))
		return 1;
	diag("%s: cannot pin to one CPU: %s", what, strerror(errno));
	return 0;
}

char *read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (!f)
		return buf;
	if (!fgets(buf, size, f))
		buf[0] = 0;
	fclose(f);
	return buf;
}

int sysfs_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), err = 0;

	if (fd < 0)
		return errno;
	if (write(fd, text, strlen(text)) < 0)
		err = errno;
	close(fd);
	return err;
}

long direct_map_kib(void)
{
	char line[128];
	long kib, total = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "DirectMap%*[^:]: %ld kB", &kib) == 1)
			total += kib;
	fclose(f);
	return total;
}

long mktme_sysfs(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), SYSFS "/%s", name);
	return read_long(path);
}

#define CPU_SYSFS "/sys/devices/system/cpu"

long cpu_value(int cpu, const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), CPU_SYSFS "/cpu%d/%s", cpu, file);
	return read_long(path);
}

int cpu_set_online(int cpu, int on)
{
	char path[128];
	ssize_t w;
	int fd, err = 0;

	snprintf(path, sizeof(path), CPU_SYSFS "/cpu%d/online", cpu);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	w = write(fd, on ? "1" : "0", 1);
	if (w != 1)
		err = w < 0 ? errno : EIO;
	close(fd);
	return err;
}

void pause_for_host(const char *prog, const char *name)
{
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	char c = 0;
	int waited = 0;

	printf("%s: pause %s\n", prog, name);
	fflush(stdout);
	while (c != '\n' && waited < 120) {
		if (poll(&pfd, 1, 1000) == 0) {
			waited++;
			continue;
		}
		if (read(0, &c, 1) != 1)
			break;
	}
	if (c != '\n')
		diag("no word from the host after %d s: going on", waited);
	printf("%s: resumed %s\n", prog, name);
}

void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int cg_file(char *buf, size_t size, const char *path, const char *file)
{
	int n = snprintf(buf, size, CGROUP_ROOT "%s%s%s%s", *path ? "/" : "",
			 path, *file ? "/" : "", file);

	return n < 0 || (size_t)n >= size ? ENAMETOOLONG : 0;
}

int cg_write(const char *path, const char *file, const char *text)
{
	char name[256];
	ssize_t w;
	int fd, err;

	err = cg_file(name, sizeof(name), path, file);
	if (err)
		return err;
	fd = open(name, O_WRONLY);
	if (fd < 0)
		return errno;
	w = write(fd, text, strlen(text));
	err = w < 0 ? errno : (size_t)w != strlen(text) ? EIO : 0;
	close(fd);
	return err;
}

int cg_create(const char *path)
{
	char name[256], parent[256];
	char *slash;
	int err;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	else
		parent[0] = '\0';
	err = cg_write(parent, "cgroup.subtree_control", "+misc");
	if (!err)
		err = cg_file(name, sizeof(name), path, "");
	if (!err && mkdir(name, 0755))
		err = errno;
	return err;
}

long cg_misc(const char *path, const char *file, const char *name)
{
	char fname[256], key[64], val[32];
	long v = -1;
	FILE *f;

	if (cg_file(fname, sizeof(fname), path, file))
		return -1;
	f = fopen(fname, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %31s", key, val) == 2) {
		if (strcmp(key, name))
			continue;
		v = strcmp(val, "max") ? strtol(val, NULL, 10) : LONG_MAX;
		break;
	}
	fclose(f);
	return v;
}

long cg_wait_current(const char *path, long want, int timeout_ms)
{
	long v;
	int t;

	for (t = 0;; t += 50) {
		v = cg_misc(path, "misc.current", "mktme");
		if (v == want || t >= timeout_ms)
			return v;
		sleep_ms(50);
	}
}

int cg_remove(const char *path)
{
	char name[256];
	int err = cg_file(name, sizeof(name), path, "");

	if (!err && rmdir(name))
		err = errno;
	return err;
}

int cg_enter(const char *path)
{
	return cg_write(path, "cgroup.procs", "0");
}

int cg_current(char *buf, size_t size)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::/", 4))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(buf, size, "%s", line + 4);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

long wait_keyids_in_use(long want, int timeout_ms)
{
	long v;
	int t;

	for (t = 0;; t += 50) {
		v = mktme_sysfs("keyids_in_use");
		if (v == want || t >= timeout_ms)
			return v;
		sleep_ms(50);
	}
}

long settled_keyids_in_use(void)
{
	long v = mktme_sysfs("keyids_in_use"), now;
	int t, stable = 0;

	for (t = 0; t < 10000 && stable < 1000; t += 100) {
		sleep_ms(100);
		now = mktme_sysfs("keyids_in_use");
		stable = now == v ? stable + 100 : 0;
		v = now;
	}
	return v;
}

static FILE *open_proc(pid_t pid, const char *what)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	else
		snprintf(path, sizeof(path), "/proc/self/%s", what);
	return fopen(path, "r");
}

/* A VMA's first line in maps and smaps: "start-end perms offset ...". */
static int vma_line(const char *line, unsigned long *start,
		    unsigned long *end, char perms[5])
{
	return sscanf(line, "%lx-%lx %4s", start, end, perms) == 3;
}

long smaps_field(pid_t pid, const void *addr, const char *field)
{
	unsigned long start, end, a = (unsigned long)addr;
	size_t n = 0, flen = strlen(field);
	long ret = -2;
	char *line = NULL, perms[5];
	int in_vma = 0;
	FILE *f = open_proc(pid, "smaps");

	while (f && getline(&line, &n, f) > 0) {
		if (vma_line(line, &start, &end, perms)) {
			if (in_vma)
				break;
			in_vma = a >= start && a < end;
			if (in_vma)
				ret = -1;
		} else if (in_vma && !strncmp(line, field, flen) &&
			   line[flen] == ':') {
			ret = strtol(line + flen + 1, NULL, 10);
			break;
		}
	}
	free(line);
	if (f)
		fclose(f);
	return ret;
}

/* "KeyID:", one or more spaces, a decimal number, the end of the line. */
static int keyid_line(const char *line)
{
	const char *p = line + strlen("KeyID:");

	if (strncmp(line, "KeyID:", strlen("KeyID:")) || *p != ' ')
		return 0;
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return *p == '\n' || *p == '\0';
}

int smaps_vmas_without_keyid(int *nr_vmas)
{
	unsigned long start, end;
	size_t n = 0;
	char *line = NULL, perms[5];
	int bad = 0, lines = -1;
	FILE *f = open_proc(0, "smaps");

	*nr_vmas = 0;
	if (!f)
		return -1;
	while (getline(&line, &n, f) > 0) {
		if (vma_line(line, &start, &end, perms)) {
			bad += lines >= 0 && lines != 1;
			lines = 0;
			++*nr_vmas;
		} else if (!strncmp(line, "KeyID", 5)) {
			/* A malformed KeyID line counts as a second one. */
			lines += keyid_line(line) ? 1 : 2;
		}
	}
	bad += lines >= 0 && lines != 1;
	free(line);
	fclose(f);
	return bad;
}

int vma_prot(const void *addr)
{
	unsigned long start, end, a = (unsigned long)addr;
	size_t n = 0;
	char *line = NULL, perms[5];
	int prot = -1;
	FILE *f = open_proc(0, "maps");

	while (f && getline(&line, &n, f) > 0) {
		if (vma_line(line, &start, &end, perms) && a >= start && a < end) {
			prot = (perms[0] == 'r' ? PROT_READ : 0) |
			       (perms[1] == 'w' ? PROT_WRITE : 0) |
			       (perms[2] == 'x' ? PROT_EXEC : 0);
			break;
		}
	}
	free(line);
	if (f)
		fclose(f);
	return prot;
}

int pagemap(const void *p, size_t n, uint64_t *e)
{
	ssize_t want = (ssize_t)(n * sizeof(*e));
	int fd = open("/proc/self/pagemap", O_RDONLY), ret = -1;

	if (fd < 0)
		return -1;
	if (pread(fd, e, want, (off_t)((uintptr_t)p / PAGE * sizeof(*e))) == want)
		ret = 0;
	close(fd);
	return ret;
}

uint64_t phys_addr(const void *p)
{
	uint64_t e;

	if (pagemap(p, 1, &e) || !(e & PM_PRESENT))
		return 0;
	return PM_PFN(e) * PAGE;
}

long sys_move_pages(unsigned long n, void **pages, const int *nodes,
		    int *status, int flags)
{
	return syscall(SYS_move_pages, 0, n, pages, nodes, status, flags);
}

int pages_on_node(void *p, int n, int node)
{
	void **pages = calloc(n, sizeof(*pages));
	int *status = calloc(n, sizeof(*status));
	int i, count = -1;

	if (pages && status) {
		for (i = 0; i < n; i++)
			pages[i] = (char *)p + (size_t)i * PAGE;
		if (!sys_move_pages(n, pages, NULL, status, 0))
			for (count = 0, i = 0; i < n; i++)
				count += status[i] == node;
	}
	free(pages);
	free(status);
	return count;
}

void *map_anon(size_t len, int flags)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static uint8_t pattern_byte(size_t i, unsigned int seed)
{
	return (uint8_t)(seed * 0x35 + i * 7 + (i >> 8) * 3 + 1);
}

void fill(void *p, size_t len, unsigned int seed)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = pattern_byte(i, seed);
}

long mismatch(const void *p, size_t len, unsigned int seed)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != pattern_byte(i, seed))
			return (long)i;
	return -1;
}

int all_zero(const void *p, size_t len)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i])
			return 0;
	return 1;
}

int in_child(int (*fn)(void *), void *arg)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

const char *mktme_missing(void)
{
	struct stat st;
	key_serial_t key;

	if (stat(SYSFS, &st) || !S_ISDIR(st.st_mode))
		return SYSFS " does not exist: not our kernel, or no MKTME";
	if (mktme_sysfs("nr_keyids") <= 0 || mktme_sysfs("keyids_in_use") < 0)
		return SYSFS "/nr_keyids or keyids_in_use unreadable or 0";
	/* An invalid payload: EINVAL from the key type, ENODEV without it. */
	key = mktme_add("probe", "type=bogus");
	if (key == -1 && errno == ENODEV)
		return "add_key(\"mktme\") gives ENODEV: no mktme key type";
	if (key != -1)
		keyctl_invalidate(key);
	return NULL;
}

int read_pte_check(struct pte_check *c)
{
	FILE *f = fopen(PTE_CHECK_DEBUGFS, "r");
	int n = 0;

	if (f) {
		n = fscanf(f, "checked %lu mismatched %ld", &c->checked,
			   &c->mismatched);
		fclose(f);
		if (n != 2)
			errno = EINVAL;
	}
	if (n == 2)
		return 0;
	*c = (struct pte_check){ 0, -1 };
	return -1;
}

/*
 * The lines of the debugfs view, into h[] (at most max); their number, or
 * -1 when it cannot be read. Each is printed as a diagnostic when show.
 */
int read_keyid_holders(struct keyid_holders *h, int max, int show)
{
	FILE *f = fopen(KEYIDS_DEBUGFS, "r");
	char line[256], serial[24];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct keyid_holders x = { 0 };

		if (show)
			diag("  %s: %.*s", KEYIDS_DEBUGFS, (int)strcspn(line, "\n"), line);
		if (sscanf(line, "%ld %ld %ld %ld %ld %ld %15s %23s %15s", &x.keyid,
			   &x.refs, &x.key, &x.vmas, &x.pages, &x.pages_found,
			   x.state, serial, x.key_state) != 9)
			continue;
		x.serial = strcmp(serial, "-") ? strtol(serial, NULL, 10) : 0;
		if (n < max)
			h[n] = x;
		n++;
	}
	fclose(f);
	return n;
}
