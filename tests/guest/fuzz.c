// SPDX-License-Identifier: GPL-2.0
/*
 * A fuzzer of the mktme key type's payload (issue 15): many generated
 * payloads, mostly mutations of valid ones, each given to add_key() and
 * checked against a reference parser of the documented grammar
 * (Documentation/x86/mktme/mktme_keys.rst, "Payload"; mktme(7)), written
 * here from the documentation alone:
 *
 *   - options separated by whitespace: space, tab or newline (nothing else
 *     separates: a comma, a carriage return or a NUL byte is part of the
 *     option it touches);
 *   - each option is NAME=VALUE, NAME one of type, algorithm, key, tweak,
 *     each at most once;
 *   - type=user|cpu|clear|no-encrypt, always required;
 *   - algorithm=aes-xts-128|aes-xts-256: required for user and cpu, not
 *     allowed for clear and no-encrypt; valid only when the platform has
 *     activated it, that is when /sys/kernel/mm/mktme/algorithms names it
 *     (without that file, kernels before issue 18: aes-xts-128 alone);
 *   - key= and tweak=: hexadecimal digits (either case), exactly 32 for
 *     aes-xts-128 and 64 for aes-xts-256, whatever the order of the
 *     options (algorithm= may come after them); required for user,
 *     optional for cpu, not allowed for the others;
 *   - an empty payload has no type=: invalid;
 *   - payloads longer than 1024 bytes (MKTME_PAYLOAD_MAX) are invalid.
 *
 * The generator chooses among the activated algorithms (uniformly) and
 * gives key= and tweak= the length of the chosen one; its mutations of
 * lengths centre on that length, and where aes-xts-256 is activated they
 * also give the other algorithm's. On a platform with aes-xts-128 alone it
 * makes the payloads of before issue 18, byte for byte, for a given seed.
 *
 * A valid payload must give a key (ENOKEY when no KeyID is free is waited
 * out and retried), an invalid one EINVAL, never another errno. Every
 * accepted key is revoked, which gives its KeyID back at once, and
 * invalidated (some only invalidated, so that the garbage collector's way
 * back for KeyIDs is taken too); some of them first encrypt a page that
 * must read back.
 *
 *   fuzz [COUNT [SEED]]     COUNT payloads (default 100000)
 */
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mktme.h"

#define RW (PROT_READ | PROT_WRITE)
#define PAYLOAD_MAX 1024	/* MKTME_PAYLOAD_MAX */
#define BUF_MAX 2200		/* generated payloads: up to about twice that */
#define TOKENS_MAX 16
#define TOKEN_MAX 192
#define SAMPLE_EVERY 64		/* accepted keys between memory checks */
#define MISMATCHES_KEPT 8
#define MISMATCHES_SHOWN 5

/* ---------------------------------------------------------------------
 * The reference parser: NULL for a valid payload, else why not.
 */
enum { R_TYPE, R_ALGORITHM, R_KEY, R_TWEAK, R_NR };
enum { T_USER, T_CPU, T_CLEAR, T_NO_ENCRYPT, T_NR };

static const char *const ref_options[R_NR] = {
	"type", "algorithm", "key", "tweak",
};
static const char *const ref_types[T_NR] = {
	"user", "cpu", "clear", "no-encrypt",
};

static int ref_separator(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static int ref_hex_digit(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
}

/* The bytes [p, p + n) are exactly the string s. */
static int ref_is(const unsigned char *p, size_t n, const char *s)
{
	return n == strlen(s) && !memcmp(p, s, n);
}

static const char *ref_check(const unsigned char *p, size_t len)
{
	static const char *const wrong_length[ALG_NR] = {
		"key= or tweak= not 32 digits long (aes-xts-128)",
		"key= or tweak= not 64 digits long (aes-xts-256)",
	};
	int seen[R_NR] = { 0 }, type = -1, alg = -1, opt, t;
	size_t i = 0, start, name_len, value_len, digits[R_NR] = { 0 };
	const unsigned char *eq, *value;

	if (len > PAYLOAD_MAX)
		return "longer than 1024 bytes";
	while (i < len) {
		if (ref_separator(p[i])) {
			i++;
			continue;
		}
		start = i;
		while (i < len && !ref_separator(p[i]))
			i++;
		eq = memchr(p + start, '=', i - start);
		if (!eq)
			return "an option without '='";
		name_len = eq - (p + start);
		value = eq + 1;
		value_len = p + i - value;
		for (opt = 0; opt < R_NR; opt++)
			if (ref_is(p + start, name_len, ref_options[opt]))
				break;
		if (opt == R_NR)
			return "an unknown option";
		if (seen[opt]++)
			return "an option given twice";
		switch (opt) {
		case R_TYPE:
			for (t = 0; t < T_NR; t++)
				if (ref_is(value, value_len, ref_types[t]))
					break;
			if (t == T_NR)
				return "an unknown type";
			type = t;
			break;
		case R_ALGORITHM:
			for (alg = 0; alg < ALG_NR; alg++)
				if (ref_is(value, value_len, alg_names[alg]))
					break;
			if (alg == ALG_NR)
				return "an unknown algorithm";
			if (!alg_active(alg))
				return "an algorithm the platform has not activated";
			break;
		default:
			for (t = 0; t < (int)value_len; t++)
				if (!ref_hex_digit(value[t]))
					return "key= or tweak= not hexadecimal";
			digits[opt] = value_len;
		}
	}
	/*
	 * The length of key= and tweak= is the algorithm's, checked once all
	 * options are read. Without algorithm=, the payload is invalid below.
	 */
	if (alg >= 0)
		for (opt = R_KEY; opt <= R_TWEAK; opt++)
			if (seen[opt] && digits[opt] != (size_t)alg_digits[alg])
				return wrong_length[alg];
	switch (type) {
	case T_USER:
		if (!seen[R_ALGORITHM] || !seen[R_KEY] || !seen[R_TWEAK])
			return "user without algorithm=, key= or tweak=";
		return NULL;
	case T_CPU:
		return seen[R_ALGORITHM] ? NULL : "cpu without algorithm=";
	case T_CLEAR:
	case T_NO_ENCRYPT:
		if (seen[R_ALGORITHM] || seen[R_KEY] || seen[R_TWEAK])
			return "clear or no-encrypt with another option";
		return NULL;
	}
	return "no type=";
}

/*
 * The reference on the documentation's examples (mktme_keys.rst), and on
 * those of aes-xts-256 (issue 18). Each is valid always, never, or when
 * the platform has activated an algorithm (ALG_128, ALG_256).
 */
enum { V_NEVER = -2, V_ALWAYS = -1 };

static const struct doc_example {
	const char *payload;
	int valid_if;
} doc_examples[] = {
	{ "type=cpu algorithm=aes-xts-128", ALG_128 },
	{ "type=user\nalgorithm=aes-xts-128\nkey=" HEX32 "\ntweak=" HEX32_B, ALG_128 },
	{ "type=no-encrypt", V_ALWAYS },
	{ "type=clear", V_ALWAYS },
	{ "type=cpu algorithm=aes-xts-128 key=" HEX32, ALG_128 },
	{ "type=cpu algorithm=aes-xts-256", ALG_256 },
	{ "type=user\nalgorithm=aes-xts-256\nkey=" HEX64 "\ntweak=" HEX64_B, ALG_256 },
	{ "type=cpu algorithm=aes-xts-256 key=" HEX64, ALG_256 },
	{ "key=" HEX64 " tweak=" HEX64_B " type=user algorithm=aes-xts-256", ALG_256 },
	{ "algorithm=aes-xts-128", V_NEVER },
	{ "no-encrypt", V_NEVER },
	{ "type=cpu", V_NEVER },
	{ "type=user algorithm=aes-xts-128 key=" HEX32, V_NEVER },
	{ "type=cpu algorithm=aes-xts-512", V_NEVER },
	{ "type=random algorithm=aes-xts-128", V_NEVER },
	{ "type=cpu algorithm=aes-xts-128 mode=fast", V_NEVER },
	{ "type=cpu type=cpu algorithm=aes-xts-128", V_NEVER },
	{ "type=clear algorithm=aes-xts-128", V_NEVER },
	{ "type=no-encrypt key=" HEX32, V_NEVER },
	{ "type=cpu algorithm=aes-xts-128 key=0011", V_NEVER },
	{ "type=cpu algorithm=aes-xts-128 key=" HEX32 "00", V_NEVER },
	{ "type=cpu algorithm=aes-xts-128 key=0011223344556677889gaabbccddeeff", V_NEVER },
	{ "", V_NEVER },
	{ " \t\n", V_NEVER },
	{ "type=user algorithm=aes-xts-256 key=" HEX32 " tweak=" HEX32_B, V_NEVER },
	{ "type=user algorithm=aes-xts-128 key=" HEX64 " tweak=" HEX64_B, V_NEVER },
	{ "key=" HEX32 " type=cpu algorithm=aes-xts-256", V_NEVER },
	{ "type=user algorithm=aes-xts-256 key=" HEX64 " tweak=" HEX32_B, V_NEVER },
	{ "type=cpu algorithm=aes-xts-256 key=" HEX64 "00", V_NEVER },
	{ "type=clear algorithm=aes-xts-256", V_NEVER },
};

/* The reference agrees on one example; counted in *valid or *invalid. */
static int reference_agrees(const char *payload, int want_valid,
			    size_t *valid, size_t *invalid)
{
	const char *why = ref_check((const unsigned char *)payload,
				    strlen(payload));

	++*(want_valid ? valid : invalid);
	if (want_valid && why)
		diag("  reference refuses valid \"%s\": %s", payload, why);
	else if (!want_valid && !why)
		diag("  reference accepts invalid \"%s\"", payload);
	return (why == NULL) == (want_valid != 0);
}

/* 1 if it agrees on every example, CPU_KEY and USER_KEY included. */
static int reference_self_test(size_t *valid, size_t *invalid)
{
	size_t i;
	int bad = 0, v;

	*valid = *invalid = 0;
	for (i = 0; i < ARRAY_SIZE(doc_examples); i++) {
		v = doc_examples[i].valid_if;
		bad += !reference_agrees(doc_examples[i].payload,
					 v == V_ALWAYS || (v >= 0 && alg_active(v)),
					 valid, invalid);
	}
	bad += !reference_agrees(CPU_KEY, 1, valid, invalid);
	bad += !reference_agrees(USER_KEY, 1, valid, invalid);
	return !bad;
}

/* ---------------------------------------------------------------------
 * The generator: a random valid payload as tokens, mutated, then joined.
 */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned int below(unsigned int n)
{
	return n ? (unsigned int)(rnd() % n) : 0;
}

static int chance(unsigned int percent)
{
	return below(100) < percent;
}

struct token {
	char s[TOKEN_MAX];
	size_t n;
};

struct payload {
	struct token t[TOKENS_MAX];
	int nr;
	int alg;	/* algorithm= of the valid payload it began as */
	unsigned char b[BUF_MAX];
	size_t len;
};

static void token_set(struct token *t, const char *name, const char *value)
{
	t->n = (size_t)snprintf(t->s, sizeof(t->s), "%s=%s", name, value);
	if (t->n >= sizeof(t->s))
		t->n = sizeof(t->s) - 1;
}

/* n hexadecimal digits, lower, upper or mixed case. */
static void random_hex(char *out, int n)
{
	static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
	int i, style = below(4);

	for (i = 0; i < n; i++) {
		int d = below(16);
		int up = style == 1 || (style == 2 && below(2));

		out[i] = up ? upper[d] : lower[d];
	}
	out[n] = '\0';
}

/* key= or tweak= of the length alg wants. */
static void hex_token(struct token *t, const char *name, int alg)
{
	char hex[65];

	random_hex(hex, alg_digits[alg]);
	token_set(t, name, hex);
}

/*
 * An activated algorithm, each as likely; without a draw when there is
 * one, so that on a platform of aes-xts-128 alone the payloads are those
 * of before issue 18.
 */
static int random_algorithm(void)
{
	int active[ALG_NR], n = 0, a;

	for (a = 0; a < ALG_NR; a++)
		if (alg_active(a))
			active[n++] = a;
	return n > 1 ? active[below(n)] : mktme_algorithm();
}

/* The algorithm of another key length than alg's. */
static int other_algorithm(int alg)
{
	return alg == ALG_128 ? ALG_256 : ALG_128;
}

/* A valid payload's options, in random order. */
static void valid_tokens(struct payload *p)
{
	int type = below(T_NR), i, j;
	struct token tmp;

	p->nr = 0;
	p->alg = random_algorithm();
	token_set(&p->t[p->nr++], "type", ref_types[type]);
	if (type == T_USER || type == T_CPU)
		token_set(&p->t[p->nr++], "algorithm", alg_names[p->alg]);
	if (type == T_USER || (type == T_CPU && chance(50)))
		hex_token(&p->t[p->nr++], "key", p->alg);
	if (type == T_USER || (type == T_CPU && chance(50)))
		hex_token(&p->t[p->nr++], "tweak", p->alg);
	for (i = p->nr - 1; i > 0; i--) {
		j = below(i + 1);
		tmp = p->t[i];
		p->t[i] = p->t[j];
		p->t[j] = tmp;
	}
}

static void put(struct payload *p, const void *s, size_t n)
{
	if (p->len + n > BUF_MAX)
		n = BUF_MAX - p->len;
	memcpy(p->b + p->len, s, n);
	p->len += n;
}

/* 1 to 3 separators from seps. */
static void separators(struct payload *p, const char *seps)
{
	int i, n = 1 + (chance(20) ? below(3) : 0);

	for (i = 0; i < n; i++)
		put(p, &seps[below(strlen(seps))], 1);
}

static void join(struct payload *p, const char *seps)
{
	int i;

	p->len = 0;
	if (chance(10))
		separators(p, seps);
	for (i = 0; i < p->nr; i++) {
		if (i)
			separators(p, seps);
		put(p, p->t[i].s, p->t[i].n);
	}
	if (chance(10))
		separators(p, seps);
}

static const char ws[] = " \t\n";

/* The token holding name=, or -1. */
static int find_token(struct payload *p, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; i < p->nr; i++)
		if (p->t[i].n > n && !memcmp(p->t[i].s, name, n) && p->t[i].s[n] == '=')
			return i;
	return -1;
}

static struct token *any_token(struct payload *p)
{
	return &p->t[below(p->nr)];
}

/* The mutations of a payload's tokens. */
enum {
	M_HEX_LENGTH, M_NOT_HEX, M_DUPLICATE, M_DROP, M_UNKNOWN, M_BAD_VALUE,
	M_FORBIDDEN, M_EQUALS, M_CASE, M_NR
};

/*
 * A wrong value of algorithm= for a payload of alg, number i of 10: the
 * other algorithm's name (valid where the platform has activated it: the
 * length of key= and tweak= decides), or alg's name changed.
 */
static void bad_algorithm(char *out, size_t size, int alg, unsigned int i)
{
	const char *name = alg_names[alg];
	size_t n = strlen(name), k;

	switch (i) {
	case 0:
		snprintf(out, size, "%s", alg_names[other_algorithm(alg)]);
		break;
	case 1: /* "AES-XTS-128" */
		for (k = 0; k <= n && k < size; k++)
			out[k] = name[k] >= 'a' && name[k] <= 'z' ?
				 name[k] - ('a' - 'A') : name[k];
		break;
	case 2:
		snprintf(out, size, "%s\r", name);
		break;
	case 3: /* "aes_xts_128" */
		for (k = 0; k <= n && k < size; k++)
			out[k] = name[k] == '-' ? '_' : name[k];
		break;
	case 4:
		out[0] = '\0';
		break;
	case 5:
		snprintf(out, size, "aes-xts");
		break;
	case 6:
		snprintf(out, size, "%s0", name);
		break;
	case 7:
		snprintf(out, size, "%s,", name);
		break;
	case 8: /* "aes-xts-12" */
		snprintf(out, size, "%.*s", (int)n - 1, name);
		break;
	default:
		snprintf(out, size, "xts");
	}
}

static void mutate_token(struct payload *p, int m)
{
	static const char *const unknown[] = {
		"mode=fast", "Type=cpu", "TYPE=cpu", "keys=" HEX32, "tweaks=" HEX32,
		"algo=aes-xts-128", "=cpu", "=", "x=y", "key2=" HEX32,
		"type =cpu", "ALGORITHM=aes-xts-128", "Key=" HEX32, "integrity=on",
	};
	static const char *const bad_types[] = {
		"User", "CPU", "Clear", "no_encrypt", "noencrypt", "no-Encrypt",
		"random", "", "cpu,", "clear\r", "user\v", "cpu\\", "userx", "c",
	};
	static const char not_hex[] = "gGxXzZ-+.:;/'\"\\\x7f\x80\xc3\xff\r\v\f";
	const char *name;
	struct token *t;
	char hex[TOKEN_MAX];
	int i, n, d = alg_digits[p->alg];

	if (!p->nr)
		return;
	switch (m) {
	case M_HEX_LENGTH:
		/*
		 * key= or tweak= of 0 to d + 32 digits, most often d - 4 to
		 * d + 4, never d (the algorithm's 32 or 64); where
		 * aes-xts-256 is activated, also the other algorithm's length.
		 */
		n = below(8) ? d + (int)below(9) - 4 : (int)below(d + 33);
		if (n == d)
			n = chance(50) ? d - 1 : d + 1;
		if (alg_active(ALG_256) && chance(20))
			n = alg_digits[other_algorithm(p->alg)];
		random_hex(hex, n);
		name = chance(50) ? "key" : "tweak";
		i = find_token(p, name);
		if (i < 0 && p->nr < TOKENS_MAX)
			i = p->nr++;
		if (i >= 0)
			token_set(&p->t[i], name, hex);
		break;
	case M_NOT_HEX:
		i = find_token(p, chance(50) ? "key" : "tweak");
		if (i < 0)
			i = find_token(p, "key") >= 0 ? find_token(p, "key") : 0;
		t = &p->t[i];
		if (t->n > 0)
			t->s[below(t->n)] = not_hex[below(sizeof(not_hex) - 1)];
		break;
	case M_DUPLICATE:
		if (p->nr < TOKENS_MAX) {
			p->t[p->nr] = *any_token(p);
			if (chance(30) && find_token(p, "key") >= 0)
				hex_token(&p->t[p->nr], "key", p->alg);
			p->nr++;
		}
		break;
	case M_DROP:
		i = below(p->nr);
		p->t[i] = p->t[--p->nr];
		break;
	case M_UNKNOWN:
		if (p->nr < TOKENS_MAX) {
			t = &p->t[p->nr++];
			t->n = (size_t)snprintf(t->s, sizeof(t->s), "%s",
						unknown[below(ARRAY_SIZE(unknown))]);
			/* "type =cpu" is two options once joined. */
		}
		break;
	case M_BAD_VALUE:
		i = find_token(p, chance(50) ? "type" : "algorithm");
		if (i < 0)
			i = find_token(p, "type");
		if (i < 0)
			break;
		if (p->t[i].s[0] == 't') {
			token_set(&p->t[i], "type", bad_types[below(ARRAY_SIZE(bad_types))]);
		} else {
			bad_algorithm(hex, sizeof(hex), p->alg, below(10));
			token_set(&p->t[i], "algorithm", hex);
		}
		break;
	case M_FORBIDDEN:
		p->nr = 0;
		token_set(&p->t[p->nr++], "type", chance(50) ? "clear" : "no-encrypt");
		switch (below(3)) {
		case 0:
			token_set(&p->t[p->nr++], "algorithm", alg_names[p->alg]);
			break;
		case 1:
			hex_token(&p->t[p->nr++], "key", p->alg);
			break;
		default:
			hex_token(&p->t[p->nr++], "tweak", p->alg);
		}
		break;
	case M_EQUALS:
		t = any_token(p);
		{
			char *eq = memchr(t->s, '=', t->n);
			size_t at = eq ? (size_t)(eq - t->s) : t->n;

			if (!eq || chance(40)) {
				/* '=' missing: "typecpu", or the name alone */
				if (eq && chance(50)) {
					memmove(eq, eq + 1, t->n - at);
					t->n--;
				} else {
					t->n = at;
				}
			} else if (t->n + 1 < sizeof(t->s)) {
				/* '=' doubled, here or at the end */
				if (chance(70)) {
					memmove(eq + 1, eq, t->n - at);
				} else {
					t->s[t->n] = '=';
				}
				t->n++;
			}
			t->s[t->n] = '\0';
		}
		break;
	case M_CASE:
		/* The case of a hex value (valid) or of a name (not). */
		t = any_token(p);
		for (i = 0; i < (int)t->n; i++)
			if (t->s[i] >= 'a' && t->s[i] <= 'z' && chance(30))
				t->s[i] -= 'a' - 'A';
		break;
	}
}

/* Classes of generated payloads, for the counts and the weights. */
enum {
	C_VALID, C_MUTATED, C_MULTI, C_COMMA, C_OTHER_SPACE, C_BYTES, C_RANDOM,
	C_TRUNCATED, C_LONG, C_NUL, C_EMPTY, C_NR
};

static const char *const class_names[C_NR] = {
	"valid, reordered, respaced", "one mutation", "2-4 mutations",
	"commas", "other whitespace", "byte edits", "random bytes",
	"truncated", "long (around and over 1024)", "with a NUL byte",
	"empty or blank",
};

/* Out of 1000; C_VALID bounds the share of valid payloads (KeyIDs). */
static const int class_weights[C_NR] = {
	[C_VALID] = 40, [C_MUTATED] = 330, [C_MULTI] = 120, [C_COMMA] = 50,
	[C_OTHER_SPACE] = 50, [C_BYTES] = 150, [C_RANDOM] = 90,
	[C_TRUNCATED] = 60, [C_LONG] = 60, [C_NUL] = 40, [C_EMPTY] = 10,
};

static unsigned char random_byte_nonul(void)
{
	return (unsigned char)(1 + below(255));
}

static int pick_class(void)
{
	int r = below(1000), c;

	for (c = 0; c < C_NR - 1; c++) {
		r -= class_weights[c];
		if (r < 0)
			return c;
	}
	return C_NR - 1;
}

static void generate(struct payload *p, int cls)
{
	static const char junk[] = "type=cpu algorithm=aes-xts-128 key= tweak==,\t\n";
	size_t i, n, at;
	int k;

	valid_tokens(p);
	switch (cls) {
	case C_VALID:
		join(p, ws);
		break;
	case C_MUTATED:
		mutate_token(p, below(M_NR));
		join(p, ws);
		break;
	case C_MULTI:
		for (k = 2 + below(3); k > 0; k--)
			mutate_token(p, below(M_NR));
		join(p, ws);
		break;
	case C_COMMA:
		join(p, chance(50) ? "," : ", ");
		if (p->nr < 2) {
			/* one option: a comma before or after it */
			if (chance(50)) {
				put(p, ",", 1);
			} else {
				memmove(p->b + 1, p->b, p->len);
				p->b[0] = ',';
				p->len++;
			}
		}
		break;
	case C_OTHER_SPACE:
		join(p, chance(50) ? "\r\v\f" : " \t\n\r\v\f");
		if (p->len < BUF_MAX && chance(30)) {
			/* "\r\n" line ends: a CR after the last option */
			put(p, "\r\n", 2);
		}
		break;
	case C_BYTES:
		join(p, ws);
		for (k = 1 + below(4); k > 0; k--) {
			at = below(p->len + 1);
			switch (below(3)) {
			case 0: /* replace */
				if (at < p->len)
					p->b[at] = random_byte_nonul();
				break;
			case 1: /* insert */
				if (p->len < BUF_MAX) {
					memmove(p->b + at + 1, p->b + at, p->len - at);
					p->b[at] = chance(50) ? random_byte_nonul() :
						   (unsigned char)junk[below(sizeof(junk) - 1)];
					p->len++;
				}
				break;
			default: /* delete */
				if (at < p->len) {
					memmove(p->b + at, p->b + at + 1, p->len - at - 1);
					p->len--;
				}
			}
		}
		break;
	case C_RANDOM:
		n = chance(80) ? below(80) : below(PAYLOAD_MAX + 100);
		p->len = 0;
		for (i = 0; i < n; i++) {
			unsigned char c = chance(50) ? random_byte_nonul() :
					  (unsigned char)junk[below(sizeof(junk) - 1)];
			put(p, &c, 1);
		}
		break;
	case C_TRUNCATED:
		join(p, ws);
		p->len = below(p->len);
		break;
	case C_LONG:
		/* Valid options, padded with whitespace or more: up to and
		 * beyond PAYLOAD_MAX, most often right at it. */
		if (chance(50))
			mutate_token(p, below(M_NR));
		join(p, ws);
		switch (below(4)) {
		case 0:
			n = PAYLOAD_MAX - 2 + below(5);
			break;
		case 1:
			n = PAYLOAD_MAX - 200 + below(200);
			break;
		default:
			n = PAYLOAD_MAX + below(BUF_MAX - PAYLOAD_MAX);
		}
		k = below(3);
		while (p->len < n && p->len < BUF_MAX) {
			unsigned char c;

			if (k == 0)
				c = (unsigned char)ws[below(3)];
			else if (k == 1)
				c = ' ';
			else
				c = (unsigned char)junk[below(sizeof(junk) - 1)];
			/* whitespace at the front or at the end */
			if (chance(50)) {
				memmove(p->b + 1, p->b, p->len);
				p->b[0] = c;
				p->len++;
			} else {
				put(p, &c, 1);
			}
		}
		break;
	case C_NUL:
		join(p, ws);
		at = below(4) ? p->len : below(p->len + 1);
		if (p->len < BUF_MAX) {
			memmove(p->b + at + 1, p->b + at, p->len - at);
			p->b[at] = '\0';
			p->len++;
		}
		/* sometimes more after it: "valid\0type=user" */
		if (chance(30) && p->len + 9 < BUF_MAX)
			put(p, "type=user", 9);
		break;
	case C_EMPTY:
		p->len = 0;
		n = below(4);
		for (i = 0; i < n; i++)
			put(p, &ws[below(3)], 1);
		break;
	}
}

/* ---------------------------------------------------------------------
 * The run.
 */
struct mismatch {
	int cls, err, accepted;
	const char *why;	/* the reference's reason, NULL if valid */
	size_t len;
	unsigned char b[BUF_MAX];
};

static struct mismatch mismatches[MISMATCHES_KEPT];
static int nr_mismatches;

static struct {
	long tried, valid, invalid, mismatched;
} per_class[C_NR];

static long n_valid, n_accepted, n_invalid, n_einval, n_other_errno;
static long n_invalid_accepted, n_valid_refused, n_enokey_waits;
static long n_long, n_long_einval, n_nul, n_nul_einval;
static long n_sampled, n_sample_ok;
static long keyids;

static void keep_mismatch(int cls, const struct payload *p, const char *why,
			  int accepted, int err)
{
	struct mismatch *m;

	per_class[cls].mismatched++;
	if (nr_mismatches++ >= MISMATCHES_KEPT)
		return;
	m = &mismatches[nr_mismatches - 1];
	m->cls = cls;
	m->why = why;
	m->accepted = accepted;
	m->err = err;
	m->len = p->len;
	memcpy(m->b, p->b, p->len);
}

/* The payload as C string contents: printable ASCII, else \n, \t, \xNN. */
static void print_escaped(const unsigned char *b, size_t len)
{
	size_t i;

	fputs("#     \"", stdout);
	for (i = 0; i < len; i++) {
		unsigned char c = b[i];

		if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	puts("\"");
}

static void show_mismatches(void)
{
	int i;

	for (i = 0; i < nr_mismatches && i < MISMATCHES_SHOWN; i++) {
		struct mismatch *m = &mismatches[i];

		diag("mismatch %d (%s, %zu bytes): the reference says %s%s; add_key %s%s",
		     i + 1, class_names[m->cls], m->len, m->why ? "invalid: " : "valid",
		     m->why ? m->why : "", m->accepted ? "accepted it" : "failed: ",
		     m->accepted ? "" : strerror(m->err));
		print_escaped(m->b, m->len);
	}
	if (nr_mismatches > MISMATCHES_SHOWN)
		diag("... and %d more mismatches", nr_mismatches - MISMATCHES_SHOWN);
}

/* A page encrypted with the key reads back what was written. */
static int memory_reads_back(key_serial_t key, unsigned int seed)
{
	char *p = map_anon(PAGE, MAP_PRIVATE);
	long keyid = -3, bad = 0;

	if (!p)
		return 0;
	if (encrypt_mprotect(p, PAGE, RW, key)) {
		diag("  encrypt_mprotect with accepted key %d: %s", key, strerror(errno));
		munmap(p, PAGE);
		return 0;
	}
	fill(p, PAGE, seed);
	keyid = keyid_of(p);
	bad = mismatch(p, PAGE, seed);
	munmap(p, PAGE);
	if (keyid <= 0 || bad != -1)
		diag("  key %d: KeyID %ld, first wrong byte at %ld", key, keyid, bad);
	return keyid > 0 && bad == -1;
}

/* Wait (at most 10 s) for a KeyID to come back: 1 once one is free. */
static int wait_free_keyid(void)
{
	int t;

	for (t = 0; t < 10000; t += 10) {
		if (mktme_sysfs("keyids_in_use") < keyids)
			return 1;
		sleep_ms(10);
	}
	return 0;
}

static void drop(key_serial_t key, long serial_nr)
{
	/* Revoking gives the KeyID back at once; 1 in 16 waits for the GC. */
	if (serial_nr % 16)
		keyctl_revoke(key);
	keyctl_invalidate(key);
}

static void try_one(long nr, int cls, struct payload *p)
{
	const char *why = ref_check(p->b, p->len);
	int has_nul = memchr(p->b, '\0', p->len) != NULL;
	int is_long = p->len > PAYLOAD_MAX, tries = 0, err = 0;
	char desc[32];
	key_serial_t key;

	per_class[cls].tried++;
	if (why)
		per_class[cls].invalid++;
	else
		per_class[cls].valid++;
	snprintf(desc, sizeof(desc), "fuzz-%ld", nr);
	for (;;) {
		key = add_key("mktme", desc, p->len ? p->b : NULL, p->len,
			      KEY_SPEC_PROCESS_KEYRING);
		err = key == -1 ? errno : 0;
		/* No KeyID free: valid, and tried again once one is back. */
		if (!why && key == -1 && err == ENOKEY && tries++ < 3) {
			n_enokey_waits++;
			if (wait_free_keyid())
				continue;
		}
		break;
	}
	if (is_long) {
		n_long++;
		n_long_einval += key == -1 && err == EINVAL;
	}
	if (has_nul) {
		n_nul++;
		n_nul_einval += key == -1 && err == EINVAL;
	}
	if (!why) {
		n_valid++;
		if (key != -1) {
			n_accepted++;
			if (n_accepted % SAMPLE_EVERY == 1) {
				n_sampled++;
				n_sample_ok += memory_reads_back(key, (unsigned int)nr);
			}
		} else {
			n_valid_refused++;
			n_other_errno += err != EINVAL && err != ENOKEY;
			keep_mismatch(cls, p, why, 0, err);
		}
	} else {
		if (!has_nul)
			n_invalid++;
		if (key != -1) {
			if (!has_nul)
				n_invalid_accepted++;
			keep_mismatch(cls, p, why, 1, 0);
		} else if (err == EINVAL) {
			n_einval += !has_nul;
		} else {
			n_other_errno++;
			keep_mismatch(cls, p, why, 0, err);
		}
	}
	if (key != -1)
		drop(key, nr);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? strtol(argv[1], NULL, 0) : 100000, nr, before, after;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) :
			(uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	static struct payload p;
	double start, took;
	size_t doc_valid, doc_invalid;
	int c, all_classes = 1, agrees;

	if (count < 1)
		count = 100000;
	plan(11);
	require_mktme();
	agrees = reference_self_test(&doc_valid, &doc_invalid);
	ok(agrees, "the reference parser agrees with mktme_keys.rst's examples (%zu valid, %zu invalid)",
	   doc_valid, doc_invalid);
	keyids = mktme_sysfs("nr_keyids");
	before = settled_keyids_in_use();
	diag("seed %#llx, %ld payloads (rerun: ./fuzz %ld %#llx)",
	     (unsigned long long)seed, count, count, (unsigned long long)seed);

	rng_state = seed;
	start = now();
	for (nr = 0; nr < count; nr++) {
		c = pick_class();
		generate(&p, c);
		try_one(nr, c, &p);
	}
	took = now() - start;
	after = wait_keyids_in_use(before, 10000);

	diag("%ld payloads in %.1f s (%.0f/s): %ld valid (%ld accepted, %ld waits for a KeyID), "
	     "%ld invalid without NUL (%ld EINVAL), %ld with NUL (%ld EINVAL), "
	     "%ld over 1024 bytes (%ld EINVAL), %ld mismatches; seed %#llx",
	     count, took, count / took, n_valid, n_accepted, n_enokey_waits,
	     n_invalid, n_einval, n_nul, n_nul_einval, n_long, n_long_einval,
	     (long)nr_mismatches, (unsigned long long)seed);
	for (c = 0; c < C_NR; c++) {
		diag("  %-28s %6ld tried, %6ld valid, %6ld invalid, %ld mismatches",
		     class_names[c], per_class[c].tried, per_class[c].valid,
		     per_class[c].invalid, per_class[c].mismatched);
		all_classes &= per_class[c].tried > 0;
	}

	ok(nr == count && all_classes && n_valid > 0 && n_invalid > 0,
	   "%ld payloads generated, every class, valid and invalid ones", nr);
	ok(n_accepted == n_valid, "%ld of %ld valid payloads accepted", n_accepted,
	   n_valid);
	ok(n_einval == n_invalid && !n_invalid_accepted,
	   "%ld of %ld invalid payloads (without NUL) refused with EINVAL (%ld accepted)",
	   n_einval, n_invalid, n_invalid_accepted);
	ok(!n_other_errno,
	   "no errno but EINVAL, and ENOKEY waited out for valid ones (%ld other)",
	   n_other_errno);
	ok(n_long_einval == n_long && n_long > 0,
	   "%ld of %ld payloads over 1024 bytes (MKTME_PAYLOAD_MAX) refused with EINVAL",
	   n_long_einval, n_long);
	ok(n_nul_einval == n_nul && n_nul > 0,
	   "%ld of %ld payloads with a NUL byte refused with EINVAL (NUL is no separator)",
	   n_nul_einval, n_nul);
	ok(n_sampled > 0 && n_sample_ok == n_sampled,
	   "%ld of %ld sampled keys encrypt a page that reads back", n_sample_ok,
	   n_sampled);
	if (!ok(!nr_mismatches, "the kernel agrees with the reference on every payload"))
		show_mismatches();
	ok(after == before, "keyids_in_use back to %ld (is %ld)", before, after);
	return done();
}
