// SPDX-License-Identifier: GPL-2.0
/*
 * The mktme key type: payloads add_key() accepts and refuses, the
 * capability check, what keyctl read/describe give away, and update.
 *
 * The algorithms (issue 18): the cases that name none use aes-xts-128
 * where the platform has activated it (/sys/kernel/mm/mktme/algorithms;
 * without that file, aes-xts-128 alone), as before issue 18, else
 * aes-xts-256 with 64-digit keys. The cases of each algorithm's key
 * lengths run where it is activated and skip elsewhere; the algorithm that
 * is not activated must give EINVAL (skipped where both are).
 */
#include <grp.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mktme.h"

/*
 * Payloads and their names are written for an algorithm with these words,
 * which expand() replaces:
 *   {alg}     its name: aes-xts-128 (the one of before issue 18) or
 *             aes-xts-256
 *   {key}     its number of digits (32 or 64) of HEX64 (HEX32 for 128)
 *   {KEY}     the same in upper case
 *   {tweak}   its number of digits of HEX64_B (HEX32_B for 128)
 *   {key-1}   {key} without its first digit: one digit too few
 *   {key-2}   {key} without its first two digits
 *   {key+1}   {key} and a "0": one digit too many
 *   {keyg}    {key} with a "g" for its 20th digit: not hexadecimal
 *   {d-2} {d-1} {d+1}   its number of digits, less 2, less 1, plus 1
 * valid[] and invalid[] are for mktme_algorithm() (aes-xts-128 where the
 * platform activates it: then they are the payloads of before issue 18,
 * byte for byte); alg_cases[] name their algorithm.
 */
struct payload {
	const char *what, *payload;
};

static const struct payload valid[] = {
	{ "cpu", "type=cpu algorithm={alg}" },
	{ "cpu, options in another order", "algorithm={alg} type=cpu" },
	{ "cpu with key entropy", "type=cpu algorithm={alg} key={key}" },
	{ "cpu with tweak entropy", "type=cpu algorithm={alg} tweak={key}" },
	{ "cpu with key and tweak entropy",
	  "type=cpu algorithm={alg} key={key} tweak={tweak}" },
	{ "user", "type=user algorithm={alg} key={key} tweak={tweak}" },
	{ "user, tab and newline separated",
	  "type=user\talgorithm={alg}\nkey={key}\ntweak={tweak}" },
	{ "user, upper-case hex",
	  "type=user algorithm={alg} key={KEY} tweak={tweak}" },
	{ "surrounding and repeated white space",
	  " \ttype=cpu  \t algorithm={alg}\n" },
	{ "clear", "type=clear" },
	{ "no-encrypt", "type=no-encrypt" },
};

static const struct payload invalid[] = {
	{ "empty", "" },
	{ "white space only", " \t\n" },
	{ "no type", "algorithm={alg}" },
	{ "empty type", "type= algorithm={alg}" },
	{ "unknown type", "type=bogus algorithm={alg}" },
	{ "cpu without algorithm", "type=cpu" },
	{ "cpu with an unknown algorithm (aes-xts-512)",
	  "type=cpu algorithm=aes-xts-512" },
	{ "empty algorithm", "type=cpu algorithm=" },
	{ "user without tweak", "type=user algorithm={alg} key={key}" },
	{ "user without key", "type=user algorithm={alg} tweak={key}" },
	{ "user without algorithm", "type=user key={key} tweak={key}" },
	{ "clear with algorithm", "type=clear algorithm={alg}" },
	{ "clear with key", "type=clear key={key}" },
	{ "clear with tweak", "type=clear tweak={key}" },
	{ "no-encrypt with algorithm", "type=no-encrypt algorithm={alg}" },
	{ "no-encrypt with key", "type=no-encrypt key={key}" },
	{ "no-encrypt with tweak", "type=no-encrypt tweak={key}" },
	{ "bare no-encrypt (the seed's example)", "no-encrypt" },
	{ "comma separated", "type=cpu,algorithm={alg}" },
	{ "duplicate type", "type=cpu type=cpu algorithm={alg}" },
	{ "duplicate algorithm", "type=cpu algorithm={alg} algorithm={alg}" },
	{ "duplicate key", "type=cpu algorithm={alg} key={key} key={key}" },
	{ "duplicate tweak",
	  "type=cpu algorithm={alg} tweak={key} tweak={key}" },
	{ "unknown option", "type=cpu algorithm={alg} foo=bar" },
	{ "option without =", "type=cpu algorithm={alg} key" },
	{ "empty key", "type=cpu algorithm={alg} key=" },
	{ "{d-1} hex digits", "type=cpu algorithm={alg} key={key-1}" },
	{ "{d+1} hex digits", "type=cpu algorithm={alg} key={key+1}" },
	{ "not hex", "type=user algorithm={alg} key={keyg} tweak={key}" },
	{ "{d-2} hex digits of tweak",
	  "type=user algorithm={alg} key={key} tweak={key-2}" },
};

/*
 * The key lengths of issue 18, each for its algorithm: run where the
 * platform has activated it, skipped elsewhere (where the algorithm alone
 * would be refused).
 */
static const struct alg_case {
	const char *what;
	int alg, valid;
	const char *payload;
} alg_cases[] = {
	{ "user, aes-xts-256: 64-digit key and tweak", ALG_256, 1,
	  "type=user algorithm={alg} key={key} tweak={tweak}" },
	{ "user, aes-xts-256, upper-case hex", ALG_256, 1,
	  "type=user algorithm={alg} key={KEY} tweak={tweak}" },
	{ "cpu, aes-xts-256 with 64-digit key and tweak entropy", ALG_256, 1,
	  "type=cpu algorithm={alg} key={key} tweak={tweak}" },
	{ "user, algorithm=aes-xts-256 after key= and tweak=", ALG_256, 1,
	  "key={key} tweak={tweak} type=user algorithm={alg}" },
	{ "user, algorithm=aes-xts-128 after key= and tweak=", ALG_128, 1,
	  "key={key} tweak={tweak} type=user algorithm={alg}" },
	{ "user, aes-xts-256 with a 32-digit key and tweak", ALG_256, 0,
	  "type=user algorithm={alg} key=" HEX32 " tweak=" HEX32_B },
	{ "user, aes-xts-256 with a 32-digit tweak", ALG_256, 0,
	  "type=user algorithm={alg} key={key} tweak=" HEX32_B },
	{ "cpu, aes-xts-256 with a 32-digit key", ALG_256, 0,
	  "type=cpu algorithm={alg} key=" HEX32 },
	{ "algorithm=aes-xts-256 after a 32-digit key and tweak", ALG_256, 0,
	  "key=" HEX32 " tweak=" HEX32_B " type=user algorithm={alg}" },
	{ "aes-xts-256, 63 hex digits", ALG_256, 0,
	  "type=cpu algorithm={alg} key={key-1}" },
	{ "aes-xts-256, 65 hex digits", ALG_256, 0,
	  "type=cpu algorithm={alg} key={key+1}" },
	{ "user, aes-xts-128 with a 64-digit key and tweak", ALG_128, 0,
	  "type=user algorithm={alg} key=" HEX64 " tweak=" HEX64_B },
	{ "cpu, aes-xts-128 with a 64-digit key", ALG_128, 0,
	  "type=cpu algorithm={alg} key=" HEX64 },
	{ "algorithm=aes-xts-128 after a 64-digit key", ALG_128, 0,
	  "key=" HEX64 " type=cpu algorithm={alg}" },
};

#define EXPANDED_MAX 512

/* tmpl with the words above for algorithm alg, into buf: buf. */
static const char *expand(char *buf, const char *tmpl, int alg)
{
	int d = alg_digits[alg], i;
	char key[72], upper[72], tweak[72], plus1[80], g[80], n[3][16];
	const struct {
		const char *word, *with;
	} words[] = {
		{ "{alg}", alg_names[alg] }, { "{key}", key }, { "{KEY}", upper },
		{ "{tweak}", tweak }, { "{key-1}", key + 1 }, { "{key-2}", key + 2 },
		{ "{key+1}", plus1 }, { "{keyg}", g }, { "{d-2}", n[0] },
		{ "{d-1}", n[1] }, { "{d+1}", n[2] },
	};
	size_t len = 0, w, wl;
	const char *with;

	snprintf(key, sizeof(key), "%.*s", d, HEX64);
	snprintf(tweak, sizeof(tweak), "%.*s", d, HEX64_B);
	snprintf(plus1, sizeof(plus1), "%s0", key);
	snprintf(g, sizeof(g), "%s", key);
	g[19] = 'g';
	for (i = 0; i <= d; i++)
		upper[i] = key[i] >= 'a' && key[i] <= 'f' ? key[i] - ('a' - 'A') : key[i];
	snprintf(n[0], sizeof(n[0]), "%d", d - 2);
	snprintf(n[1], sizeof(n[1]), "%d", d - 1);
	snprintf(n[2], sizeof(n[2]), "%d", d + 1);
	while (*tmpl) {
		for (w = 0; w < ARRAY_SIZE(words); w++)
			if (!strncmp(tmpl, words[w].word, strlen(words[w].word)))
				break;
		if (w < ARRAY_SIZE(words)) {
			with = words[w].with;
			wl = strlen(with);
			tmpl += strlen(words[w].word);
		} else {
			with = tmpl++;
			wl = 1;
		}
		if (len + wl >= EXPANDED_MAX)
			bail_out("keys.c: a payload longer than %d bytes", EXPANDED_MAX);
		memcpy(buf + len, with, wl);
		len += wl;
	}
	buf[len] = '\0';
	return buf;
}

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

/* The cases of alg_cases[], run or skipped. */
static void test_alg_cases(void)
{
	char payload[EXPANDED_MAX], why[300];
	const struct alg_case *c;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(alg_cases); i++) {
		c = &alg_cases[i];
		if (!alg_active(c->alg)) {
			snprintf(why, sizeof(why), "%s is not activated: algorithms %s",
				 alg_names[c->alg], mktme_algorithms_text());
			skip(why, "add_key %s %s%s", c->valid ? "accepts" : "refuses",
			     c->what, c->valid ? "" : ": EINVAL");
		} else if (c->valid) {
			add_valid(c->what, expand(payload, c->payload, c->alg));
		} else {
			add_invalid(c->what, expand(payload, c->payload, c->alg));
		}
	}
}

/*
 * An algorithm the kernel knows but the platform has not activated: EINVAL
 * (before issue 18, aes-xts-256 on every platform), for a cpu key and for
 * a user key with that algorithm's key length. Skipped where both are.
 */
static void test_not_activated(void)
{
	static const char *const payloads[] = {
		"type=cpu algorithm={alg}",
		"type=user algorithm={alg} key={key} tweak={tweak}",
	};
	char buf[EXPANDED_MAX], why[300], what[64];
	int alg = alg_active(ALG_256) ? ALG_128 : ALG_256;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(payloads); i++) {
		snprintf(what, sizeof(what), "%s with %s, not activated",
			 i ? "user" : "cpu", alg_names[alg]);
		if (alg_active(alg)) {
			snprintf(why, sizeof(why), "both algorithms are activated: %s",
				 mktme_algorithms_text());
			skip(why, "add_key refuses %s: EINVAL", what);
		} else {
			add_invalid(what, expand(buf, payloads[i], alg));
		}
	}
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

	ok(key > 0, "add a user key (key %.*s)", alg_digits[mktme_algorithm()],
	   HEX64);
	is_errno(keyctl_read(key, buf, sizeof(buf)), EOPNOTSUPP,
		 "KEYCTL_READ of a mktme key: EOPNOTSUPP");
	if (keyctl_describe_alloc(key, &desc) < 0)
		desc = NULL;
	/* HEX32 and HEX32_B begin the key and tweak of every algorithm. */
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
	char *p = map_anon(PAGE, MAP_PRIVATE), bad[EXPANDED_MAX];
	long keyid;

	ok(key > 0 && update(key, USER_KEY) == 0,
	   "update cpu -> user with no memory mapped: success");
	is_errno(update(key, expand(bad, "type=user algorithm={alg} key={key}",
				    mktme_algorithm())), EINVAL,
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
	char big[1026], what[EXPANDED_MAX], payload[EXPANDED_MAX];
	int alg = mktme_algorithm();
	size_t i;

	plan(1 + ARRAY_SIZE(valid) + ARRAY_SIZE(invalid) + ARRAY_SIZE(alg_cases) +
	     2 + 2 + 2 + 5 + 4 + 8 + 3 + 6);
	require_mktme();
	diag("the payloads of the cases not named by algorithm: %s",
	     alg_names[alg]);

	for (i = 0; i < ARRAY_SIZE(valid); i++)
		add_valid(expand(what, valid[i].what, alg),
			  expand(payload, valid[i].payload, alg));
	for (i = 0; i < ARRAY_SIZE(invalid); i++)
		add_invalid(expand(what, invalid[i].what, alg),
			    expand(payload, invalid[i].payload, alg));
	test_alg_cases();
	test_not_activated();
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
