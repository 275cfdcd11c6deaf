// SPDX-License-Identifier: GPL-2.0
/*
 * The mktme key type: payloads add_key() accepts and refuses, the
 * capability check, what keyctl read/describe give away, and update.
 */
#include <grp.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mktme.h"

#define ALG " algorithm=aes-xts-128"

struct payload {
	const char *what, *payload;
};

static const struct payload valid[] = {
	{ "cpu", "type=cpu" ALG },
	{ "cpu, options in another order", "algorithm=aes-xts-128 type=cpu" },
	{ "cpu with key entropy", "type=cpu" ALG " key=" HEX32 },
	{ "cpu with tweak entropy", "type=cpu" ALG " tweak=" HEX32 },
	{ "cpu with key and tweak entropy",
	  "type=cpu" ALG " key=" HEX32 " tweak=" HEX32_B },
	{ "user", USER_KEY },
	{ "user, tab and newline separated",
	  "type=user\talgorithm=aes-xts-128\nkey=" HEX32 "\ntweak=" HEX32_B },
	{ "user, upper-case hex",
	  "type=user" ALG " key=00112233445566778899AABBCCDDEEFF tweak=" HEX32_B },
	{ "surrounding and repeated white space", " \ttype=cpu  \t" ALG "\n" },
	{ "clear", "type=clear" },
	{ "no-encrypt", "type=no-encrypt" },
};

static const struct payload invalid[] = {
	{ "empty", "" },
	{ "white space only", " \t\n" },
	{ "no type", "algorithm=aes-xts-128" },
	{ "empty type", "type=" ALG },
	{ "unknown type", "type=bogus" ALG },
	{ "cpu without algorithm", "type=cpu" },
	{ "cpu with aes-xts-256", "type=cpu algorithm=aes-xts-256" },
	{ "empty algorithm", "type=cpu algorithm=" },
	{ "user without tweak", "type=user" ALG " key=" HEX32 },
	{ "user without key", "type=user" ALG " tweak=" HEX32 },
	{ "user without algorithm", "type=user key=" HEX32 " tweak=" HEX32 },
	{ "clear with algorithm", "type=clear" ALG },
	{ "clear with key", "type=clear key=" HEX32 },
	{ "clear with tweak", "type=clear tweak=" HEX32 },
	{ "no-encrypt with algorithm", "type=no-encrypt" ALG },
	{ "no-encrypt with key", "type=no-encrypt key=" HEX32 },
	{ "no-encrypt with tweak", "type=no-encrypt tweak=" HEX32 },
	{ "bare no-encrypt (the seed's example)", "no-encrypt" },
	{ "comma separated", "type=cpu,algorithm=aes-xts-128" },
	{ "duplicate type", "type=cpu type=cpu" ALG },
	{ "duplicate algorithm", "type=cpu" ALG ALG },
	{ "duplicate key", "type=cpu" ALG " key=" HEX32 " key=" HEX32 },
	{ "duplicate tweak", "type=cpu" ALG " tweak=" HEX32 " tweak=" HEX32 },
	{ "unknown option", "type=cpu" ALG " foo=bar" },
	{ "option without =", "type=cpu" ALG " key" },
	{ "empty key", "type=cpu" ALG " key=" },
	{ "31 hex digits", "type=cpu" ALG " key=0112233445566778899aabbccddeeff" },
	{ "33 hex digits", "type=cpu" ALG " key=" HEX32 "0" },
	{ "not hex", "type=user" ALG " key=0011223344556677889gaabbccddeeff"
		     " tweak=" HEX32 },
	{ "30 hex digits of tweak", "type=user" ALG " key=" HEX32
				    " tweak=112233445566778899aabbccddeeff" },
};

/*
 * Invalidate a key and wait until its KeyID is back in the pool: the key
 * garbage collector releases it later, and on a model with 7 KeyIDs a run
 * of add_key() calls would otherwise find the pool empty (ENOKEY).
 */
static void drop_key(key_serial_t key, long keyids_before)
{
	keyctl_invalidate(key);
	wait_keyids_in_use(keyids_before, 10000);
}

static void add_valid(const char *what, const char *payload)
{
	long before = mktme_sysfs("keyids_in_use");
	key_serial_t key = mktme_add("valid", payload);

	if (!ok(key > 0, "add_key accepts %s", what))
		diag("  errno %s for \"%s\"", strerror(errno), payload);
	if (key > 0)
		drop_key(key, before);
}

static void add_invalid(const char *what, const char *payload)
{
	long before = mktme_sysfs("keyids_in_use");
	key_serial_t key = mktme_add("invalid", payload);

	if (!is_errno(key, EINVAL, "add_key refuses %s: EINVAL", what) &&
	    strlen(payload) < 200)
		diag("  payload \"%s\"", payload);
	if (key > 0)
		drop_key(key, before);
}

/*
 * A payload of len bytes that holds a NUL: the kernel must not read it as a
 * C string that ends early, which would drop what follows the NUL.
 */
static void add_with_nul(const char *what, const char *payload, size_t len)
{
	long before = mktme_sysfs("keyids_in_use");
	key_serial_t key = add_key("mktme", "nul", payload, len,
				   KEY_SPEC_PROCESS_KEYRING);

	is_errno(key, EINVAL, "add_key refuses %s: EINVAL", what);
	if (key > 0)
		drop_key(key, before);
}

/* A cpu key padded with spaces to len bytes. */
static void padded(char *buf, size_t len)
{
	memset(buf, ' ', len);
	memcpy(buf, CPU_KEY, strlen(CPU_KEY));
	buf[len] = '\0';
}

/* The child's exit status is errno of its add_key(), 0 on success. */
static int add_key_status(const char *type, const char *payload)
{
	long before = mktme_sysfs("keyids_in_use");
	key_serial_t key = add_key(type, "child", payload, strlen(payload),
				   KEY_SPEC_PROCESS_KEYRING);

	if (key == -1)
		return errno;
	drop_key(key, before);
	return 0;
}

/* Become uid/gid 65534, which leaves no capability; then add a key. */
static int add_as_nobody(void *type)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534))
		return 250;
	if (syscall(SYS_capget, &h, d) || d[0].effective || d[1].effective ||
	    d[0].permitted || d[1].permitted)
		return 251;
	if (!strcmp(type, "user"))
		return add_key_status("user", "data");
	return add_key_status("mktme", CPU_KEY);
}

/* As root, with CAP_SYS_RESOURCE and/or CAP_SYS_ADMIN dropped. */
static int add_with_caps(void *caps)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return 250;
	d[0].effective &= ~(1U << CAP_SYS_RESOURCE | 1U << CAP_SYS_ADMIN);
	d[0].effective |= *(unsigned int *)caps;
	if (syscall(SYS_capset, &h, d))
		return 251;
	return add_key_status("mktme", CPU_KEY);
}

static void child_is(int status, int want, const char *what)
{
	if (!ok(status == want, "%s: %s", what, want ? strerror(want) : "success"))
		diag("  child status %d (%s)", status,
		     status > 0 && status < 250 ? strerror(status) : "-");
}

static void test_capabilities(void)
{
	unsigned int none = 0, resource = 1U << CAP_SYS_RESOURCE,
		     admin = 1U << CAP_SYS_ADMIN;

	child_is(in_child(add_as_nobody, "mktme"), EACCES,
		 "uid 65534 without capabilities adds a mktme key");
	child_is(in_child(add_as_nobody, "user"), 0,
		 "uid 65534 adds a user key (control: the keyring takes keys)");
	child_is(in_child(add_with_caps, &none), EACCES,
		 "root without CAP_SYS_RESOURCE and CAP_SYS_ADMIN");
	child_is(in_child(add_with_caps, &resource), 0,
		 "root with CAP_SYS_RESOURCE only");
	child_is(in_child(add_with_caps, &admin), 0,
		 "root with CAP_SYS_ADMIN only");
}

/* Nothing of the key material is readable or shown. */
static void test_read_describe(void)
{
	key_serial_t key = mktme_add("secret-name", USER_KEY);
	char buf[512], *desc = NULL, *line = NULL, serial[16];
	size_t n = 0;
	int shown = 0;
	FILE *f;

	ok(key > 0, "add a user key (key " HEX32 ")");
	is_errno(keyctl_read(key, buf, sizeof(buf)), EOPNOTSUPP,
		 "KEYCTL_READ of a mktme key: EOPNOTSUPP");
	if (keyctl_describe_alloc(key, &desc) < 0)
		desc = NULL;
	if (!ok(desc && !strncmp(desc, "mktme;", 6) &&
		strlen(desc) > 12 && !strcmp(desc + strlen(desc) - 12, ";secret-name") &&
		!strstr(desc, HEX32) && !strstr(desc, HEX32_B),
		"keyctl describe: type and description, no key material"))
		diag("  describe: %s", desc ? desc : strerror(errno));
	free(desc);

	snprintf(serial, sizeof(serial), "%08x ", (unsigned int)key);
	f = fopen("/proc/keys", "r");
	while (f && getline(&line, &n, f) > 0) {
		if (strncmp(line, serial, strlen(serial)))
			continue;
		shown = strstr(line, "mktme") && !strstr(line, HEX32) &&
			!strstr(line, HEX32_B);
		diag("  /proc/keys: %s", strtok(line, "\n"));
	}
	ok(shown, "/proc/keys lists the key without its key material");
	free(line);
	if (f)
		fclose(f);
	keyctl_invalidate(key);
}

static long update(key_serial_t key, const char *payload)
{
	return keyctl_update(key, payload, strlen(payload));
}

static void test_update(void)
{
	key_serial_t key = mktme_add("update", CPU_KEY);
	char *p = map_anon(PAGE, MAP_PRIVATE);
	long keyid;

	ok(key > 0 && update(key, USER_KEY) == 0,
	   "update cpu -> user with no memory mapped: success");
	is_errno(update(key, "type=user" ALG " key=" HEX32), EINVAL,
		 "update with an invalid payload: EINVAL");
	keyid = encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key) ? -3 :
		keyid_of(p);
	if (!ok(keyid > 0, "the key still works: encrypt_mprotect gives KeyID %ld",
		keyid))
		diag("  %s", strerror(errno));
	if (keyid > 0)
		fill(p, PAGE, 5);
	ok(keyid > 0 && mismatch(p, PAGE, 5) == -1, "and its memory reads back");
	is_errno(update(key, CPU_KEY), EBUSY,
		 "update while memory is mapped with the key: EBUSY");
	ok(keyid > 0 && mismatch(p, PAGE, 5) == -1 && keyid_of(p) == keyid,
	   "the refused update left the memory and its KeyID alone");
	munmap(p, PAGE);
	ok(update(key, CPU_KEY) == 0, "update after munmap: success");
	ok(update(key, "type=clear") == 0, "update to type=clear: success");
	keyctl_invalidate(key);
}

/*
 * The keys core updates a negative key when add_key() finds it: a
 * request_key() that the upcall negated (Debian's request-key.conf negates
 * what no rule handles) leaves one in the destination keyring. Old kernels
 * dereferenced its missing payload.
 */
static void test_negative_update(void)
{
	char desc[64], *p = map_anon(PAGE, MAP_PRIVATE);
	key_serial_t neg, key;
	long keyid = -3;

	snprintf(desc, sizeof(desc), "negative-%d", (int)getpid());
	neg = request_key("mktme", desc, NULL, KEY_SPEC_PROCESS_KEYRING);
	if (!ok(neg == -1 && (errno == ENOKEY || errno == EKEYREJECTED),
		"request_key of an unknown mktme key: negated (ENOKEY)"))
		diag("  request_key: %ld, %s", (long)neg, strerror(errno));
	key = add_key("mktme", desc, CPU_KEY, strlen(CPU_KEY),
		      KEY_SPEC_PROCESS_KEYRING);
	if (!ok(key > 0, "add_key of the same description updates the negative key: success"))
		diag("  add_key: %s", strerror(errno));
	if (key > 0 && p && !encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key))
		keyid = keyid_of(p);
	if (keyid > 0)
		fill(p, PAGE, 7);
	ok(keyid > 0 && mismatch(p, PAGE, 7) == -1,
	   "the now positive key encrypts memory (KeyID %ld) that reads back", keyid);
	if (p)
		munmap(p, PAGE);
	if (key > 0)
		keyctl_invalidate(key);
}

static void write_sysctl_one(const char *path)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
}

/*
 * Revoking a key releases its KeyID at once, not after the garbage
 * collector's delay: back in the pool within a second once no memory uses
 * it. Memory encrypted with it stays readable until unmapped.
 */
static void test_revoke(void)
{
	long before = settled_keyids_in_use(), during;
	key_serial_t key = mktme_add("revoke", CPU_KEY);
	char *p = map_anon(PAGE, MAP_PRIVATE);
	int mapped = key > 0 && p &&
		     !encrypt_mprotect(p, PAGE, PROT_READ | PROT_WRITE, key);

	if (mapped)
		fill(p, PAGE, 8);
	ok(mapped && keyctl_revoke(key) == 0, "revoke a key whose memory is mapped");
	ok(mapped && mismatch(p, PAGE, 8) == -1 && keyid_of(p) > 0,
	   "its memory still reads back, under its KeyID");
	is_errno(p ? encrypt_mprotect(p, PAGE, PROT_READ, key) : 0, EKEYREVOKED,
		 "encrypt_mprotect with the revoked key: EKEYREVOKED");
	during = mktme_sysfs("keyids_in_use");
	ok(during == before + 1, "the memory holds the KeyID: keyids_in_use %ld (before %ld)",
	   during, before);
	if (p)
		munmap(p, PAGE);
	/*
	 * The freed page can wait in a per-CPU LRU batch that holds a
	 * reference; compaction drains those batches on every CPU first.
	 */
	write_sysctl_one("/proc/sys/vm/compact_memory");
	ok(wait_keyids_in_use(before, 1000) == before,
	   "munmap: the KeyID is free within a second (keyids_in_use %ld)", before);

	key = mktme_add("revoke-unused", USER_KEY);
	ok(key > 0 && keyctl_revoke(key) == 0 &&
	   wait_keyids_in_use(before, 1000) == before,
	   "revoking an unused key frees its KeyID within a second");
}

int main(void)
{
	char big[1026];
	size_t i;

	plan(1 + ARRAY_SIZE(valid) + ARRAY_SIZE(invalid) + 2 + 2 + 5 + 4 + 8 + 3 + 6);
	require_mktme();

	for (i = 0; i < ARRAY_SIZE(valid); i++)
		add_valid(valid[i].what, valid[i].payload);
	for (i = 0; i < ARRAY_SIZE(invalid); i++)
		add_invalid(invalid[i].what, invalid[i].payload);
	padded(big, 1024);
	add_valid("a payload of 1024 bytes", big);
	padded(big, 1025);
	add_invalid("a payload of 1025 bytes", big);
	add_with_nul("a valid payload and its terminating NUL",
		     CPU_KEY, strlen(CPU_KEY) + 1);
	add_with_nul("no-encrypt, a NUL, then type=user",
		     "type=no-encrypt\0type=user", 25);

	test_capabilities();
	test_read_describe();
	test_update();
	test_negative_update();
	test_revoke();
	return done();
}
