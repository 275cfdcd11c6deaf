/*
 * MKTME model test payload: CPUID, MSR and PCONFIG semantics and KeyID
 * memory, checked from inside the guest.  Writes TAP to the debug console
 * (port 0xe9) and exits through isa-debug-exit (port 0xf4).
 *
 * Multiboot command line words:
 *   keyid_bits=N  expected KeyID bit count (default 6)
 *   algs=N        expected IA32_TME_ACTIVATE algorithm mask, bits 63:48
 *                 (default 1, AES-XTS-128; 4 AES-XTS-256; 5 both): the
 *                 tests program keys with the first activated one, and
 *                 check PCONFIG's argument rules for each
 *   inject        the host injected one DEVICE_BUSY on package 0
 *   bench         time accesses through KeyID 0 and KeyID 1
 *   ap_keyid_bits=N  after the CPUID and MSR tests, instead of the others:
 *                 start the second CPU (hot-added by the host with N KeyID
 *                 bits, more than the boot CPU's) and check its PCONFIG
 *                 against the key table, which has the boot CPU's KeyIDs
 *   home=K        instead of the other tests: home-package key tables on
 *                 two sockets.  Each package gets its own random key for
 *                 KeyID 1 and its own direct key for KeyID 2 (package 0:
 *                 00../10.., package 1: e0../f0..); data written through
 *                 them at BUF_PA (package 0's memory) and BUF_PA + K
 *                 pages (package 1's: the host chooses K) reads back
 *                 right on both CPUs
 *   bypass_off    the host turned TME encryption bypass off: KeyID 0 is
 *                 encrypted with the TME key, NO_ENCRYPT KeyIDs are not
 *   kid0          before holding, write the pattern through KeyID 0 at
 *                 KID0_PA (the host looks for it in raw DRAM)
 *   hold          after the tests, halt and wait for the host (QMP)
 *   violate       at the end, break each cache coherence rule once (the
 *                 host counts the model's reports)
 *   evict         instead of the other memory tests: dirty more lines
 *                 than a small cache (mktme-cache-lines=16) holds and
 *                 check that the replaced ones reached RAM unflushed
 */
#include <stddef.h>
#include <stdint.h>

#define BUF_PA		0x2000000ULL	/* host-checked buffer, KeyID 1 */
#define WORK_PA		0x3000000ULL	/* scratch for the other tests */
#define BENCH_PA	0x4000000ULL
#define KID0_PA		0x5000000ULL	/* KeyID-0 pattern for the host */
#define BENCH_BYTES	(4 * 1024 * 1024)
#define PAGE		4096
#define AP_TRAMPOLINE	0x8000ULL	/* as in boot.S */
#define APIC_PA		0xfee00000ULL
#define APIC_SVR	0xf0
#define APIC_ICR_LO	0x300
#define APIC_ICR_HI	0x310
#define ICR_ALL_BUT_SELF (3U << 18)
#define ICR_ASSERT	(1U << 14)
#define ICR_INIT	(5U << 8)
#define ICR_SIPI	(6U << 8)

#define CMD_DIRECT	0
#define CMD_RANDOM	1
#define CMD_CLEAR	2
#define CMD_NOENC	3
#define ALG_XTS128	(1 << 8)
#define ALG_XTS128_INT	(2 << 8)
#define ALG_XTS256	(4 << 8)

#define RFLAGS_CF	(1 << 0)
#define RFLAGS_PF	(1 << 2)
#define RFLAGS_AF	(1 << 4)
#define RFLAGS_ZF	(1 << 6)
#define RFLAGS_SF	(1 << 7)
#define RFLAGS_OF	(1 << 11)
#define RFLAGS_STATUS	(RFLAGS_CF | RFLAGS_PF | RFLAGS_AF | RFLAGS_ZF | \
			 RFLAGS_SF | RFLAGS_OF)

long catch_call(void (*fn)(void *), void *arg);
void enter_user(void (*fn)(void), void *stack_top);
void user_pconfig(void);
void ap_main(void);
extern char ap_trampoline[], ap_trampoline_end[];
extern char exc_stubs[];
extern uint64_t gdt[];
extern uint64_t pml4[512];
extern uint64_t caught_rip, caught_error;

static void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static void putc_(char c)
{
	outb(0xe9, (uint8_t)c);
}

static void puts_(const char *s)
{
	while (*s)
		putc_(*s++);
}

static void put_dec(uint64_t v)
{
	char buf[24];
	int i = 0;

	do {
		buf[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i)
		putc_(buf[--i]);
}

static void put_hex(uint64_t v)
{
	int i;

	puts_("0x");
	for (i = 60; i >= 0; i -= 4)
		putc_("0123456789abcdef"[(v >> i) & 0xf]);
}

static void *memset_(void *d, int c, size_t n)
{
	uint8_t *p = d;

	while (n--)
		*p++ = (uint8_t)c;
	return d;
}

/* gcc may emit calls to these */
void *memset(void *d, int c, size_t n)
{
	return memset_(d, c, n);
}

void *memcpy(void *d, const void *s, size_t n)
{
	uint8_t *dp = d;
	const uint8_t *sp = s;

	while (n--)
		*dp++ = *sp++;
	return d;
}

static void exit_qemu(uint32_t code)
{
	outl(0xf4, code);
	for (;;)
		__asm__ volatile("cli; hlt");
}

static int tests, failures;

static void ok(int cond, const char *name)
{
	tests++;
	if (!cond) {
		failures++;
		puts_("not ");
	}
	puts_("ok ");
	put_dec(tests);
	puts_(" - ");
	puts_(name);
	putc_('\n');
}

static void diag_hex(const char *what, uint64_t v)
{
	puts_("# ");
	puts_(what);
	putc_(' ');
	put_hex(v);
	putc_('\n');
}

void unexpected_exception(uint64_t *frame)
{
	puts_("Bail out! unexpected exception ");
	put_dec(frame[0]);
	puts_(" error ");
	put_hex(frame[1]);
	puts_(" at ");
	put_hex(frame[2]);
	putc_('\n');
	exit_qemu(3);
}

static void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	__asm__ volatile("cpuid"
			 : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
			 : "a"(leaf), "c"(sub));
}

static uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

static void load_cr3(void)
{
	uint64_t cr3;

	__asm__ volatile("mov %%cr3, %0; mov %0, %%cr3" : "=r"(cr3) : : "memory");
}

/* --- descriptor tables ------------------------------------------------ */

struct idt_entry {
	uint16_t off0, sel;
	uint8_t ist, type;
	uint16_t off1;
	uint32_t off2, zero;
} __attribute__((packed));

static struct idt_entry idt[32] __attribute__((aligned(16)));
static uint8_t tss[104] __attribute__((aligned(16)));
static uint8_t ring0_stack[16384] __attribute__((aligned(16)));
static uint8_t user_stack[4096] __attribute__((aligned(16)));

static struct {
	uint16_t limit;
	uint64_t base;
} __attribute__((packed)) idtr;

static void setup_tables(void)
{
	uint64_t base = (uint64_t)tss, stack = (uint64_t)(ring0_stack + sizeof(ring0_stack));
	int i;

	for (i = 0; i < 32; i++) {
		uint64_t off = (uint64_t)(exc_stubs + 16 * i);

		idt[i].off0 = (uint16_t)off;
		idt[i].sel = 0x08;
		idt[i].ist = 0;
		idt[i].type = 0x8e;	/* present, DPL 0, interrupt gate */
		idt[i].off1 = (uint16_t)(off >> 16);
		idt[i].off2 = (uint32_t)(off >> 32);
		idt[i].zero = 0;
	}
	idtr.limit = sizeof(idt) - 1;
	idtr.base = (uint64_t)idt;
	__asm__ volatile("lidt %0" : : "m"(idtr));

	memcpy(tss + 4, &stack, 8);	/* RSP0 */
	gdt[5] = (sizeof(tss) - 1) | ((base & 0xffffff) << 16) |
		 (0x89ULL << 40) | (((base >> 24) & 0xff) << 56);
	gdt[6] = base >> 32;
	__asm__ volatile("ltr %w0" : : "r"(0x28));
}

/* --- paging: identity-map 1 GiB at a KeyID alias ------------------------ */

static uint64_t pool[16][512] __attribute__((aligned(4096)));
static int pool_used;

static uint64_t *pool_alloc(void)
{
	uint64_t *p = pool[pool_used++];

	memset_(p, 0, PAGE);
	return p;
}

static void map_1g(uint64_t base)
{
	uint64_t *pdpt, *pd;
	unsigned i4 = (base >> 39) & 511, i3 = (base >> 30) & 511, i;

	if (!(pml4[i4] & 1))
		pml4[i4] = (uint64_t)pool_alloc() | 7;
	pdpt = (uint64_t *)(pml4[i4] & ~0xfffULL);
	if (pdpt[i3] & 1)
		return;
	pd = pool_alloc();
	for (i = 0; i < 512; i++)
		pd[i] = (base + ((uint64_t)i << 21)) | 0x87;
	pdpt[i3] = (uint64_t)pd | 7;
	load_cr3();
}

static unsigned keyid_shift;

static volatile uint8_t *kid(unsigned keyid, uint64_t pa)
{
	return (volatile uint8_t *)(((uint64_t)keyid << keyid_shift) | pa);
}

/* --- PCONFIG ------------------------------------------------------------ */

struct key_program {
	uint16_t keyid;
	uint32_t keyid_ctrl;
	uint8_t rsvd[58];
	uint8_t key_field_1[64];
	uint8_t key_field_2[64];
} __attribute__((packed, aligned(256)));

static struct key_program prog_area[2];

/* ENC_ALG of the first activated algorithm, and its key bytes */
static uint32_t alg_ctrl = ALG_XTS128;
static unsigned key_len = 16;

static uint64_t last_rflags;

static uint64_t pconfig_raw(uint64_t leaf, void *prog)
{
	uint64_t rax = leaf, flags;

	/* Set every status flag first so that clearing them shows */
	__asm__ volatile("pushfq\n\t"
			 "orq %3, (%%rsp)\n\t"
			 "popfq\n\t"
			 ".byte 0x0f, 0x01, 0xc5\n\t"
			 "pushfq\n\t"
			 "popq %1"
			 : "+a"(rax), "=r"(flags)
			 : "b"(prog), "i"(RFLAGS_CF | RFLAGS_PF | RFLAGS_AF | RFLAGS_SF | RFLAGS_OF)
			 : "memory", "cc");
	last_rflags = flags;
	return rax;
}

static uint64_t program(unsigned keyid, uint32_t ctrl, uint8_t k1, uint8_t k2)
{
	struct key_program *p = &prog_area[0];
	int i;

	memset_(p, 0, sizeof(*p));
	p->keyid = (uint16_t)keyid;
	p->keyid_ctrl = ctrl;
	for (i = 0; i < (int)key_len; i++) {
		p->key_field_1[i] = (uint8_t)(k1 + i);
		p->key_field_2[i] = (uint8_t)(k2 + i);
	}
	return pconfig_raw(0, p);
}

/* PCONFIG of prog_area[0], run by catch_call(): RAX in *arg */
static void do_pconfig_rax(void *arg)
{
	*(uint64_t *)arg = pconfig_raw(0, &prog_area[0]);
}

/*
 * The structure of program(1, ctrl) with byte @off set to @val: the
 * vector PCONFIG raised (0 if none), RAX in *rax.
 */
static long program_poked(uint32_t ctrl, unsigned off, uint8_t val,
			  uint64_t *rax)
{
	struct key_program *p = &prog_area[0];
	int i;

	memset_(p, 0, sizeof(*p));
	p->keyid = 1;
	p->keyid_ctrl = ctrl;
	for (i = 0; i < 16; i++) {
		p->key_field_1[i] = (uint8_t)(0x20 + i);
		p->key_field_2[i] = (uint8_t)(0x30 + i);
	}
	((uint8_t *)p)[off] = val;
	*rax = ~0ULL;
	return catch_call(do_pconfig_rax, rax);
}

/* Success: RAX 0, ZF and every other status flag clear */
static int prog_ok(uint64_t rax)
{
	return rax == 0 && !(last_rflags & RFLAGS_STATUS);
}

/* Failure: RAX = status, ZF set, the other status flags clear */
static int prog_fails(uint64_t rax, uint64_t status)
{
	return rax == status &&
	       (last_rflags & RFLAGS_STATUS) == RFLAGS_ZF;
}

static void do_pconfig_misaligned(void *arg)
{
	(void)arg;
	pconfig_raw(0, (uint8_t *)&prog_area[0] + 64);
}

static void do_pconfig_leaf1(void *arg)
{
	(void)arg;
	pconfig_raw(1, &prog_area[0]);
}

static uint32_t wr_msr;

static void do_wrmsr(void *arg)
{
	(void)arg;
	__asm__ volatile("wrmsr" : : "c"(wr_msr), "a"(0), "d"(0));
}

static void do_user(void *arg)
{
	(void)arg;
	enter_user(user_pconfig, user_stack + sizeof(user_stack));
}

/*
 * PCONFIG's argument rules (TME-MK spec rev 1.3/1.4, section 6): #GP(0)
 * for reserved KEYID_CTRL bits, reserved bytes and key bytes beyond the
 * named algorithm's key; INVALID_ENC_ALG for an ENC_ALG that is not
 * exactly one activated algorithm, whatever the command.
 */
static void pconfig_rule(const char *name, uint32_t ctrl, unsigned off,
			 uint8_t val, long want_vec, uint64_t want_rax)
{
	uint64_t rax;
	long vec = program_poked(ctrl, off, val, &rax);

	if (want_vec > 0)
		ok(vec == want_vec, name);
	else
		ok(vec == -1 && (want_rax ? prog_fails(rax, want_rax) :
				 prog_ok(rax)), name);
}

static void test_pconfig_rules(unsigned algs)
{
	static const struct {
		unsigned bit;
		uint32_t ctrl;
		unsigned len;
	} a[] = { { 1, ALG_XTS128, 16 }, { 4, ALG_XTS256, 32 } };
	unsigned i;

	pconfig_rule("PCONFIG reserved KEYID_CTRL bit 24 #GP",
		     CMD_DIRECT | alg_ctrl | (1U << 24), 0, 1, 13, 0);
	pconfig_rule("PCONFIG reserved KEYID_CTRL bit 31 #GP",
		     CMD_CLEAR | alg_ctrl | (1U << 31), 0, 1, 13, 0);
	pconfig_rule("PCONFIG reserved byte 6 non-zero #GP",
		     CMD_DIRECT | alg_ctrl, 6, 1, 13, 0);
	pconfig_rule("PCONFIG reserved byte 63 non-zero #GP",
		     CMD_NOENC | alg_ctrl, 63, 0x80, 13, 0);
	for (i = 0; i < 2; i++) {
		unsigned f1 = 64, f2 = 128;

		if (algs & a[i].bit) {
			puts_(a[i].len == 16 ? "# activated: AES-XTS-128\n" :
			      "# activated: AES-XTS-256\n");
			pconfig_rule("PCONFIG KEY_FIELD_1 byte after the key #GP",
				     CMD_DIRECT | a[i].ctrl, f1 + a[i].len, 1, 13, 0);
			pconfig_rule("PCONFIG KEY_FIELD_2 byte 63 #GP",
				     CMD_RANDOM | a[i].ctrl, f2 + 63, 1, 13, 0);
			pconfig_rule("PCONFIG CLEAR_KEY with a key byte after the key #GP",
				     CMD_CLEAR | a[i].ctrl, f2 + a[i].len, 1, 13, 0);
			pconfig_rule("PCONFIG NO_ENCRYPT with KEY_FIELD_1 byte 63 #GP",
				     CMD_NOENC | a[i].ctrl, f1 + 63, 1, 13, 0);
			pconfig_rule("PCONFIG last key byte of the algorithm set: success",
				     CMD_DIRECT | a[i].ctrl, f1 + a[i].len - 1, 0xff,
				     0, 0);
			pconfig_rule("PCONFIG CLEAR_KEY with the activated algorithm: success",
				     CMD_CLEAR | a[i].ctrl, 0, 1, 0, 0);
			pconfig_rule("PCONFIG NO_ENCRYPT with the activated algorithm: success",
				     CMD_NOENC | a[i].ctrl, 0, 1, 0, 0);
		} else {
			puts_(a[i].len == 16 ? "# not activated: AES-XTS-128\n" :
			      "# not activated: AES-XTS-256\n");
			pconfig_rule("PCONFIG SET_KEY_DIRECT, algorithm not activated: INVALID_ENC_ALG",
				     CMD_DIRECT | a[i].ctrl, 0, 1, 0, 4);
			pconfig_rule("PCONFIG CLEAR_KEY, algorithm not activated: INVALID_ENC_ALG",
				     CMD_CLEAR | a[i].ctrl, 0, 1, 0, 4);
			pconfig_rule("PCONFIG NO_ENCRYPT, algorithm not activated: INVALID_ENC_ALG",
				     CMD_NOENC | a[i].ctrl, 0, 1, 0, 4);
			pconfig_rule("PCONFIG algorithm not activated, key byte 63 set: INVALID_ENC_ALG, no #GP",
				     CMD_DIRECT | a[i].ctrl, f1 + 63, 1, 0, 4);
		}
	}
	pconfig_rule("PCONFIG CLEAR_KEY without algorithm: INVALID_ENC_ALG",
		     CMD_CLEAR, 0, 1, 0, 4);
	pconfig_rule("PCONFIG NO_ENCRYPT without algorithm: INVALID_ENC_ALG",
		     CMD_NOENC, 0, 1, 0, 4);
	pconfig_rule("PCONFIG CLEAR_KEY with two algorithms: INVALID_ENC_ALG",
		     CMD_CLEAR | ALG_XTS128 | ALG_XTS256, 0, 1, 0, 4);
	pconfig_rule("PCONFIG SET_KEY_RANDOM with AES-XTS-128 with integrity: INVALID_ENC_ALG",
		     CMD_RANDOM | ALG_XTS128_INT, 0, 1, 0, 4);
	pconfig_rule("PCONFIG unnamed algorithm bit 3: INVALID_ENC_ALG",
		     CMD_DIRECT | (8 << 8), 0, 1, 0, 4);
	/* Leave KeyID 1 as the tests after this one expect to find it */
	program(1, CMD_CLEAR | alg_ctrl, 0, 0);
}

/* --- memory ------------------------------------------------------------- */

static uint8_t pattern_byte(uint64_t off)
{
	return (uint8_t)(off * 7 + 3 + (off >> 8));
}

static void fill(volatile uint8_t *p, size_t n)
{
	volatile uint64_t *q = (volatile uint64_t *)p;
	size_t i, j;

	for (i = 0; i < n / 8; i++) {
		uint64_t v = 0;

		for (j = 0; j < 8; j++)
			v |= (uint64_t)pattern_byte(i * 8 + j) << (8 * j);
		q[i] = v;
	}
}

static int matches(volatile uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pattern_byte(i))
			return 0;
	return 1;
}

/* True if no 16-byte block of p holds its plaintext */
static int all_blocks_differ(volatile uint8_t *p, size_t n)
{
	size_t b, i;

	for (b = 0; b < n; b += 16) {
		int same = 1;

		for (i = 0; i < 16; i++)
			if (p[b + i] != pattern_byte(b + i))
				same = 0;
		if (same)
			return 0;
	}
	return 1;
}

/* --- caches --------------------------------------------------------------- */

#define LINE		64

static void clflush(volatile uint8_t *p)
{
	__asm__ volatile("clflush %0" : "+m"(*p) : : "memory");
}

static void clflushopt(volatile uint8_t *p)
{
	__asm__ volatile("clflushopt %0" : "+m"(*p) : : "memory");
}

static void clwb(volatile uint8_t *p)
{
	__asm__ volatile("clwb %0" : "+m"(*p) : : "memory");
}

/* Write back and drop every line of [p, p + n), as a kernel would */
static void flush(volatile uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i += LINE)
		clflush(p + i);
	__asm__ volatile("mfence" : : : "memory");
}

static void zero(volatile uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = 0;
}

static int all_zero(volatile uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int same_bytes(volatile uint8_t *a, volatile uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

static uint64_t bench(volatile uint64_t *p, size_t n)
{
	uint64_t t0 = rdtsc(), sum = 0;
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = i;
	for (i = 0; i < n; i++)
		sum += p[i];
	if (sum != (uint64_t)n * (n - 1) / 2)
		puts_("# bench: bad sum\n");
	return rdtsc() - t0;
}

/*
 * Time a write pass and a read pass over BENCH_BYTES through KeyID 0 and
 * through KeyID 1 (encrypting, or a plain alias with mktme-cipher=off);
 * the best of seven interleaved runs of each, in alternating order.
 */
static void run_bench(void)
{
	volatile uint64_t *b0 = (volatile uint64_t *)kid(0, BENCH_PA);
	volatile uint64_t *b1 = (volatile uint64_t *)kid(1, BENCH_PA);
	size_t n = BENCH_BYTES / 8;
	uint64_t t0 = ~0ULL, t1 = ~0ULL, t;
	int i;

	bench(b0, n);	/* warm up the TLB and the translated code */
	bench(b1, n);
	for (i = 0; i < 7; i++) {
		/* Alternate the order so that neither side is always second */
		if (i & 1) {
			t = bench(b1, n);
			t1 = t < t1 ? t : t1;
		}
		t = bench(b0, n);
		t0 = t < t0 ? t : t0;
		if (!(i & 1)) {
			t = bench(b1, n);
			t1 = t < t1 ? t : t1;
		}
	}
	puts_("# bench keyid0 ");
	put_dec(t0);
	puts_(" keyid1 ");
	put_dec(t1);
	puts_(" ratio_x1000 ");
	put_dec(t1 * 1000 / (t0 ? t0 : 1));
	putc_('\n');
}

/* --- a second CPU ---------------------------------------------------------- */

/*
 * What the second CPU did: its APIC ID and KeyID bits, and the status and
 * flags of PCONFIG for each of ap_keyids[].
 */
#define AP_PROGRAMS	4
static volatile unsigned ap_keyids[AP_PROGRAMS];
static volatile int ap_done;
static volatile unsigned ap_apic_id, ap_bits;
static volatile uint64_t ap_rax[AP_PROGRAMS], ap_rflags[AP_PROGRAMS];

/*
 * home=K: the second CPU (package 1) programs KeyIDs 1 and 2 of its key
 * table, waits for the boot CPU to write through them, reads all back,
 * then writes a page of its own at each place.
 */
#define HOME_PLACES	2
static volatile int ap_mode_home, ap_programmed, bsp_written;
static volatile uint64_t home_pa[HOME_PLACES];
static volatile int ap_read_ok[2 * HOME_PLACES];

static void ap_home(void)
{
	int i;

	ap_rax[0] = program(1, CMD_RANDOM | alg_ctrl, 0, 0);
	ap_rflags[0] = last_rflags;
	ap_rax[1] = program(2, CMD_DIRECT | alg_ctrl, 0xe0, 0xf0);
	ap_rflags[1] = last_rflags;
	__asm__ volatile("" : : : "memory");
	ap_programmed = 1;
	while (!bsp_written)
		__asm__ volatile("pause");
	for (i = 0; i < HOME_PLACES; i++) {
		ap_read_ok[2 * i] = matches(kid(1, home_pa[i]), PAGE);
		ap_read_ok[2 * i + 1] = matches(kid(2, home_pa[i] + 2 * PAGE), PAGE);
		fill(kid(1, home_pa[i] + 4 * PAGE), PAGE);
		flush(kid(1, home_pa[i] + 4 * PAGE), PAGE);
	}
}

/* Runs on the second CPU (boot.S's ap_long), while the boot CPU waits */
void ap_main(void)
{
	uint32_t r[4];
	int i;

	__asm__ volatile("lidt %0" : : "m"(idtr));
	if (ap_mode_home) {
		ap_home();
		__asm__ volatile("" : : : "memory");
		ap_done = 1;
		return;
	}
	cpuid(1, 0, r);
	ap_apic_id = r[1] >> 24;
	ap_bits = (rdmsr(0x982) >> 32) & 0xf;
	for (i = 0; i < AP_PROGRAMS; i++) {
		ap_rax[i] = program(ap_keyids[i], CMD_DIRECT | alg_ctrl, 0xa0, 0xb0);
		ap_rflags[i] = last_rflags;
	}
	__asm__ volatile("" : : : "memory");
	ap_done = 1;
}

static void apic_write(unsigned reg, uint32_t v)
{
	*(volatile uint32_t *)(APIC_PA + reg) = v;
}

static void spin(uint64_t cycles)
{
	uint64_t t0 = rdtsc();

	while (rdtsc() - t0 < cycles)
		__asm__ volatile("pause");
}

/* Start every other CPU at AP_TRAMPOLINE (INIT, then SIPI twice) */
static void start_ap(void)
{
	volatile uint8_t *dst = (volatile uint8_t *)AP_TRAMPOLINE;
	long i;

	map_1g(APIC_PA & ~((1ULL << 30) - 1));
	for (i = 0; i < ap_trampoline_end - ap_trampoline; i++)
		dst[i] = (uint8_t)ap_trampoline[i];
	apic_write(APIC_SVR, 0x1ff);	/* software enabled */
	apic_write(APIC_ICR_HI, 0);
	apic_write(APIC_ICR_LO, ICR_ALL_BUT_SELF | ICR_ASSERT | ICR_INIT);
	spin(10000000);
	for (i = 0; i < 2; i++) {
		apic_write(APIC_ICR_LO, ICR_ALL_BUT_SELF | ICR_ASSERT | ICR_SIPI |
			   (uint32_t)(AP_TRAMPOLINE >> 12));
		spin(1000000);
	}
}

/* Wait until *flag is set, at most about ten seconds */
static int wait_flag(volatile int *flag)
{
	uint64_t t0 = rdtsc();

	while (!*flag && rdtsc() - t0 < 30000000000ULL)
		__asm__ volatile("pause");
	return *flag;
}

/* Start the other CPUs and wait for ap_main() to finish */
static int run_ap(void)
{
	start_ap();
	return wait_flag(&ap_done);
}

/*
 * home=K: one key table per package, each used for its own memory
 * (TME-MK spec: the engine at the memory controller), so different
 * random keys per package for one KeyID keep data right.
 */
static void test_home(unsigned pages)
{
	int started, i;
	uint64_t rax1, rax2;

	home_pa[0] = BUF_PA;
	home_pa[1] = BUF_PA + (uint64_t)pages * PAGE;
	ap_mode_home = 1;
	start_ap();
	started = wait_flag(&ap_programmed);
	ok(started && ap_rax[0] == 0 && ap_rax[1] == 0,
	   "home: second CPU (package 1) programs KeyID 1 (random) and 2 (direct)");
	if (!started)
		return;
	rax1 = program(1, CMD_RANDOM | alg_ctrl, 0, 0);
	rax2 = program(2, CMD_DIRECT | alg_ctrl, 0x00, 0x10);
	ok(prog_ok(rax1) && prog_ok(rax2),
	   "home: boot CPU (package 0) programs KeyID 1 (random) and 2 (direct)");
	for (i = 0; i < HOME_PLACES; i++) {
		fill(kid(1, home_pa[i]), PAGE);
		flush(kid(1, home_pa[i]), PAGE);
		fill(kid(2, home_pa[i] + 2 * PAGE), PAGE);
		flush(kid(2, home_pa[i] + 2 * PAGE), PAGE);
	}
	ok(matches(kid(1, home_pa[0]), PAGE) && matches(kid(1, home_pa[1]), PAGE),
	   "home: KeyID 1 reads back on the boot CPU, in either package's memory");
	ok(matches(kid(2, home_pa[0] + 2 * PAGE), PAGE) &&
	   matches(kid(2, home_pa[1] + 2 * PAGE), PAGE),
	   "home: KeyID 2 reads back on the boot CPU, in either package's memory");
	ok(all_blocks_differ(kid(0, home_pa[0]), PAGE) &&
	   all_blocks_differ(kid(0, home_pa[1]), PAGE),
	   "home: KeyID 0 sees ciphertext in both packages' memory");
	flush(kid(1, home_pa[0]), PAGE);
	flush(kid(1, home_pa[1]), PAGE);
	flush(kid(2, home_pa[0] + 2 * PAGE), PAGE);
	flush(kid(2, home_pa[1] + 2 * PAGE), PAGE);
	__asm__ volatile("mfence" : : : "memory");
	bsp_written = 1;
	ok(wait_flag(&ap_done), "home: second CPU read and wrote");
	ok(ap_read_ok[0] && ap_read_ok[2],
	   "home: KeyID 1 data the boot CPU wrote reads back on the second CPU, in either package's memory");
	ok(ap_read_ok[1] && ap_read_ok[3],
	   "home: KeyID 2 data the boot CPU wrote reads back on the second CPU, in either package's memory");
	ok(matches(kid(1, home_pa[0] + 4 * PAGE), PAGE) &&
	   matches(kid(1, home_pa[1] + 4 * PAGE), PAGE),
	   "home: KeyID 1 data the second CPU wrote reads back on the boot CPU");
	flush(kid(1, home_pa[0] + 4 * PAGE), PAGE);
	flush(kid(1, home_pa[1] + 4 * PAGE), PAGE);
}

/*
 * The second CPU has want_bits KeyID bits, the key tables the boot CPU's
 * table_max KeyIDs: PCONFIG there programs the table's KeyIDs and answers
 * INVALID_KEYID beyond them, even for KeyIDs within its own bits.
 */
static void test_ap(unsigned want_bits, unsigned table_max)
{
	static const char *const invalid[AP_PROGRAMS] = {
		NULL,
		"second CPU: PCONFIG KeyID beyond the key table, within its bits: INVALID_KEYID, ZF set",
		"second CPU: PCONFIG its own highest KeyID (beyond the table): INVALID_KEYID",
		"second CPU: PCONFIG KeyID beyond its bits: INVALID_KEYID",
	};
	unsigned ap_max = (1U << want_bits) - 1;
	int started, i;

	ap_keyids[0] = table_max;
	ap_keyids[1] = table_max + 1;
	ap_keyids[2] = ap_max;
	ap_keyids[3] = ap_max + 1;
	started = run_ap();
	ok(started && ap_apic_id != 0, "second CPU started");
	ok(started && ap_bits == want_bits,
	   "second CPU: IA32_TME_ACTIVATE has its own KeyID bits");
	ok(started && ap_rax[0] == 0 && !(ap_rflags[0] & RFLAGS_STATUS),
	   "second CPU: PCONFIG the key table's highest KeyID succeeds");
	for (i = 1; i < AP_PROGRAMS; i++)
		ok(started && ap_rax[i] == 3 &&
		   (ap_rflags[i] & RFLAGS_STATUS) == RFLAGS_ZF, invalid[i]);
	if (!started)
		return;
	puts_("# second CPU: APIC ID ");
	put_dec(ap_apic_id);
	puts_(", ");
	put_dec(ap_bits);
	puts_(" KeyID bits; KeyID: status");
	for (i = 0; i < AP_PROGRAMS; i++) {
		puts_(i ? ", " : " ");
		put_dec(ap_keyids[i]);
		puts_(": ");
		put_dec(ap_rax[i]);
	}
	putc_('\n');
}

/* --- command line --------------------------------------------------------- */

static const char *cmdline = "";

/*
 * The command line word w, alone or as "w=value": a pointer just past w in
 * the command line (at '=', ' ' or the end), or NULL when w is not there.
 */
static const char *find_word(const char *w)
{
	const char *s = cmdline;
	size_t n = 0;

	while (w[n])
		n++;
	while (*s) {
		size_t i = 0;

		while (i < n && s[i] == w[i])
			i++;
		if (i == n && (s[n] == ' ' || s[n] == '\0' || s[n] == '='))
			return s + n;
		while (*s && *s != ' ')
			s++;
		while (*s == ' ')
			s++;
	}
	return NULL;
}

static int has_word(const char *w)
{
	return find_word(w) != NULL;
}

static unsigned word_value(const char *w, unsigned dflt)
{
	const char *s = find_word(w);
	unsigned v = 0;

	if (!s || *s != '=')
		return dflt;
	for (s++; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (unsigned)(*s - '0');
	return v;
}

/* --- tests ---------------------------------------------------------------- */

/*
 * The caches hold KeyID lines as plaintext and write them back only when
 * flushed, evicted or WBINVD'd; KeyID 0 reads RAM, so it sees old
 * ciphertext until then.  KeyID 1 has data key 00.., tweak key 10...
 */
#define CACHE_PA	(WORK_PA + 8 * PAGE)

static void test_caches(void)
{
	volatile uint8_t *c0 = kid(0, CACHE_PA), *c1 = kid(1, CACHE_PA);
	int i, n;

	zero(c0, 4 * PAGE);
	fill(c1, PAGE);
	ok(all_zero(c0, PAGE), "unflushed KeyID 1 lines: KeyID 0 still reads the old memory");
	clwb(c1);
	__asm__ volatile("sfence" : : : "memory");
	ok(all_blocks_differ(c0, LINE) && !all_zero(c0, LINE) &&
	   all_zero(c0 + LINE, PAGE - LINE),
	   "CLWB writes back its line only");
	ok(matches(c1, PAGE), "CLWB keeps the line: KeyID 1 still reads the pattern");
	for (i = 0; i < PAGE; i += LINE)
		clflushopt(c1 + i);
	__asm__ volatile("sfence" : : : "memory");
	ok(all_blocks_differ(c0, PAGE) && !all_zero(c0 + PAGE - LINE, LINE),
	   "CLFLUSHOPT writes back every line: ciphertext at KeyID 0");
	ok(matches(c1, PAGE), "after CLFLUSHOPT KeyID 1 refills the pattern from RAM");
	flush(c1, PAGE);

	/* WBINVD: everything back */
	fill(c1 + PAGE, PAGE);
	__asm__ volatile("wbinvd" : : : "memory");
	ok(all_blocks_differ(c0 + PAGE, PAGE) && !all_zero(c0 + PAGE, LINE),
	   "WBINVD writes back every dirty line");
	ok(matches(c1 + PAGE, PAGE), "after WBINVD KeyID 1 reads the pattern from RAM");
	flush(c1 + PAGE, PAGE);

	/* INVD: dirty lines are lost, RAM keeps what it had */
	fill(c1 + 2 * PAGE, PAGE);
	__asm__ volatile("invd" : : : "memory");
	ok(all_zero(c0 + 2 * PAGE, PAGE), "INVD drops dirty lines: RAM unchanged");
	n = 0;
	for (i = 0; i < PAGE; i += 16)
		n += !same_bytes(c1 + 2 * PAGE + i, c0 + 2 * PAGE + i, 16);
	ok(!matches(c1 + 2 * PAGE, PAGE) && n == PAGE / 16,
	   "after INVD KeyID 1 reads RAM's zeros decrypted (garbage), not the pattern");
	flush(c1 + 2 * PAGE, PAGE);

	/* The same key again over unflushed lines: they keep their meaning */
	fill(c1 + 3 * PAGE, LINE);
	ok(prog_ok(program(1, CMD_DIRECT | alg_ctrl, 0x00, 0x10)),
	   "PCONFIG of KeyID 1's own key again over its unflushed lines (the host counts no violation)");
	flush(c1 + 3 * PAGE, LINE);
}

/* Pages read through KeyID 1 to push a dirty page out of two */
#define EVICT_TOUCHES	32

static void touch_other_pages(void)
{
	int i;

	for (i = 0; i < EVICT_TOUCHES; i++)
		(void)kid(1, CACHE_PA + (16 + i) * PAGE)[0];
}

/* With mktme-cache-lines=128 (two pages): dirty a page, flush none */
static void test_eviction(void)
{
	volatile uint8_t *c0 = kid(0, CACHE_PA), *c1 = kid(1, CACHE_PA);
	int i, reached = 0;

	zero(c0, PAGE);
	fill(c1, PAGE);
	touch_other_pages();
	for (i = 0; i < PAGE; i += LINE)
		reached += !all_zero(c0 + i, LINE);
	puts_("# lines written back by replacement: ");
	put_dec(reached);
	puts_(" of 64\n");
	ok(reached == PAGE / LINE,
	   "a page replaced from a two-page cache wrote back all 64 dirty lines, none flushed");
	ok(all_blocks_differ(c0, PAGE), "they are ciphertext at KeyID 0");
	ok(matches(c1, PAGE), "the replaced page refills: KeyID 1 reads the whole pattern");
	flush(c1, PAGE);

	/*
	 * Replacement wrote the page back, but software flushed none of
	 * it: KeyID 2 on the page is still a violation (the host counts one).
	 */
	zero(c0, PAGE);
	fill(c1, PAGE);
	touch_other_pages();
	ok(!all_zero(c0, PAGE), "the unflushed page was replaced");
	puts_("# violate: KeyID 2 reads the replaced page\n");
	(void)kid(2, CACHE_PA)[0];
	flush(c1, PAGE);
}

/*
 * Break each rule once, for the host to count: the model reports, and
 * with mktme-cache-strict=on stops at the first.
 */
static void violate(void)
{
	volatile uint8_t *a = kid(1, CACHE_PA + 4 * PAGE);

	puts_("# violate: fill\n");
	a[0] = 1;			/* KeyID 1 line dirty */
	kid(2, CACHE_PA + 4 * PAGE)[LINE] = 5;	/* KeyID 2 fills and writes: one violation */
	flush(kid(2, CACHE_PA + 4 * PAGE) + LINE, LINE);
	flush(a, LINE);
	puts_("# violate: stale-write-back\n");
	a[0] = 2;
	kid(0, CACHE_PA + 4 * PAGE)[0] = 3;	/* KeyID 0 writes under it */
	flush(a, LINE);			/* the write-back destroys that */
	puts_("# violate: pconfig-dirty\n");
	kid(5, CACHE_PA + 5 * PAGE)[0] = 4;
	program(5, CMD_DIRECT | alg_ctrl, 0x62, 0x72);
	flush(kid(5, CACHE_PA + 5 * PAGE), LINE);
	puts_("# violate: done\n");
	/* Left dirty for the host's x-mktme-cache-write-back */
	fill(kid(1, CACHE_PA + 6 * PAGE), PAGE);
}

void kmain(uint32_t mb_info)
{
	uint32_t r[4], flags = *(volatile uint32_t *)(uint64_t)mb_info;
	unsigned want_bits, bits, phys, max_keyid, k, algs;
	uint64_t act, cap, rax;
	volatile uint8_t *p0, *p1;

	if (flags & (1 << 2))
		cmdline = (const char *)(uint64_t)*(volatile uint32_t *)(uint64_t)(mb_info + 16);
	want_bits = word_value("keyid_bits", 6);
	setup_tables();
	puts_("# MKTME model guest tests; command line: ");
	puts_(cmdline);
	putc_('\n');

	/* CPUID */
	cpuid(0, 0, r);
	ok(r[1] == 0x756e6547 && r[3] == 0x49656e69 && r[2] == 0x6c65746e,
	   "vendor is GenuineIntel");
	ok(r[0] >= 0x1b, "max basic leaf reaches 0x1B");
	cpuid(7, 0, r);
	ok(r[2] & (1 << 13), "CPUID.7.0:ECX[13] TME");
	ok(r[3] & (1 << 18), "CPUID.7.0:EDX[18] PCONFIG");
	cpuid(0x1b, 0, r);
	ok(r[0] == 1 && r[1] == 1 && r[2] == 0 && r[3] == 0,
	   "CPUID.1B.0 lists target 1 (MKTME)");
	cpuid(0x1b, 1, r);
	ok(r[0] == 0, "CPUID.1B.1 is invalid (end of targets)");
	cpuid(0x80000008, 0, r);
	phys = r[0] & 0xff;

	/* MSRs */
	act = rdmsr(0x982);
	diag_hex("IA32_TME_ACTIVATE", act);
	bits = (act >> 32) & 0xf;
	ok((act & 3) == 3, "IA32_TME_ACTIVATE locked and enabled");
	algs = word_value("algs", 1);
	ok(((act >> 4) & 0xf) == ((algs & 1) ? 0 : 2),
	   "IA32_TME_ACTIVATE policy AES-XTS-128 (0), or AES-XTS-256 (2) if only that");
	ok((act >> 48) == algs, "IA32_TME_ACTIVATE bits 63:48: the activated algorithms");
	ok(!!(act & (1ULL << 31)) == !has_word("bypass_off"),
	   "IA32_TME_ACTIVATE bit 31: TME encryption bypass as mktme-tme-bypass");
	if (!(algs & 1)) {
		alg_ctrl = ALG_XTS256;
		key_len = 32;
	}
	ok(bits == want_bits, "IA32_TME_ACTIVATE KeyID bits match mktme-keyid-bits");
	cap = rdmsr(0x981);
	diag_hex("IA32_TME_CAPABILITY", cap);
	ok((cap & (1ULL << 31)), "IA32_TME_CAPABILITY bit 31: TME encryption bypass supported");
	ok((cap & 7) == algs && ((cap >> 32) & 0xf) == bits &&
	   ((cap >> 36) & 0x7fff) == (1U << bits) - 1,
	   "IA32_TME_CAPABILITY algorithms (never bit 1, integrity), max KeyID bits and keys");
	wr_msr = 0x982;
	ok(catch_call(do_wrmsr, NULL) == 13, "WRMSR IA32_TME_ACTIVATE after lock #GP");
	wr_msr = 0x981;
	ok(catch_call(do_wrmsr, NULL) == 13, "WRMSR IA32_TME_CAPABILITY #GP");

	if (bits == 0 || bits > 15 || phys < 32 + bits) {
		puts_("Bail out! no usable KeyID geometry\n");
		exit_qemu(3);
	}
	keyid_shift = phys - bits;
	max_keyid = (1U << bits) - 1;
	puts_("# phys-bits ");
	put_dec(phys);
	puts_(", KeyID shift ");
	put_dec(keyid_shift);
	puts_(", KeyIDs 1-");
	put_dec(max_keyid);
	putc_('\n');
	for (k = 1; k <= 5 && k <= max_keyid; k++)
		map_1g((uint64_t)k << keyid_shift);
	map_1g((uint64_t)max_keyid << keyid_shift);

	if (has_word("home")) {
		test_home(word_value("home", 1));
		goto done;
	}

	if (has_word("ap_keyid_bits")) {
		test_ap(word_value("ap_keyid_bits", 0), max_keyid);
		goto done;
	}

	if (has_word("evict")) {
		rax = program(1, CMD_DIRECT | alg_ctrl, 0x00, 0x10);
		ok(prog_ok(rax), "PCONFIG SET_KEY_DIRECT KeyID 1");
		test_eviction();
		goto done;
	}

	if (has_word("benchonly")) {
		rax = program(1, CMD_DIRECT | alg_ctrl, 0x00, 0x10);
		ok(prog_ok(rax), "PCONFIG SET_KEY_DIRECT KeyID 1");
		run_bench();
		puts_("1..");
		put_dec(tests);
		putc_('\n');
		exit_qemu(failures ? 1 : 0);
	}

	/* PCONFIG faults */
	ok(catch_call(do_user, NULL) == 6, "PCONFIG at CPL 3 #UD");
	ok(catch_call(do_pconfig_misaligned, NULL) == 13,
	   "PCONFIG with a struct not 256-byte aligned #GP");
	ok(catch_call(do_pconfig_leaf1, NULL) == 13, "PCONFIG leaf 1 #GP");

	/* PCONFIG status codes */
	rax = program(1, 4 | alg_ctrl, 0, 0);
	ok(prog_fails(rax, 1), "PCONFIG command 4: INVALID_PROG_CMD, ZF set");
	rax = program(0, CMD_DIRECT | alg_ctrl, 0, 0);
	ok(prog_fails(rax, 3), "PCONFIG KeyID 0: INVALID_KEYID");
	rax = program(max_keyid + 1, CMD_DIRECT | alg_ctrl, 0, 0);
	ok(prog_fails(rax, 3), "PCONFIG KeyID 2^bits: INVALID_KEYID");
	rax = program(1, CMD_DIRECT, 0, 0);
	ok(prog_fails(rax, 4), "PCONFIG SET_KEY_DIRECT without algorithm: INVALID_ENC_ALG");
	rax = program(1, CMD_DIRECT | (2 << 8), 0, 0);
	ok(prog_fails(rax, 4), "PCONFIG unknown algorithm: INVALID_ENC_ALG");
	if (has_word("inject")) {
		rax = program(1, CMD_DIRECT | alg_ctrl, 0x00, 0x10);
		ok(prog_fails(rax, 5), "PCONFIG with injected DEVICE_BUSY: status 5, ZF set");
	}
	test_pconfig_rules(algs);

	/* KeyID 1: SET_KEY_DIRECT, data key 00..0f, tweak key 10..1f */
	rax = program(1, CMD_DIRECT | alg_ctrl, 0x00, 0x10);
	ok(prog_ok(rax), "PCONFIG SET_KEY_DIRECT KeyID 1: RAX 0, ZF and status flags clear");
	p0 = kid(0, BUF_PA);
	p1 = kid(1, BUF_PA);
	fill(p1, PAGE);
	ok(matches(p1, PAGE), "pattern written through KeyID 1 reads back through KeyID 1");
	flush(p1, PAGE);
	ok(all_blocks_differ(p0, PAGE), "KeyID 0 sees ciphertext in every 16-byte block");

	/* Tweak: the same plaintext block at two addresses */
	{
		volatile uint64_t *q = (volatile uint64_t *)kid(1, WORK_PA);

		q[0] = 0x1111111111111111ULL;
		q[1] = 0x2222222222222222ULL;
		q[2] = 0x1111111111111111ULL;
		q[3] = 0x2222222222222222ULL;
		flush((volatile uint8_t *)q, LINE);
		p0 = kid(0, WORK_PA);
		ok(!same_bytes(p0, p0 + 16, 16),
		   "same plaintext at two addresses gives different ciphertext");
	}

	/* Partial and unaligned accesses (read-modify-write of XTS blocks) */
	{
		volatile uint8_t *b = kid(1, WORK_PA + 256);
		volatile uint64_t *u = (volatile uint64_t *)(b + 12);
		int good;

		fill(b, 64);
		b[5] = 0xa5;
		*u = 0x0123456789abcdefULL;
		good = b[5] == 0xa5 && *u == 0x0123456789abcdefULL &&
		       b[4] == pattern_byte(4) && b[6] == pattern_byte(6) &&
		       b[11] == pattern_byte(11) && b[20] == pattern_byte(20);
		ok(good, "byte and block-crossing 8-byte writes through KeyID 1");
		flush(b, 2 * LINE);
	}

	/* NO_ENCRYPT */
	rax = program(2, CMD_NOENC | alg_ctrl, 0, 0);
	ok(prog_ok(rax), "PCONFIG NO_ENCRYPT KeyID 2");
	fill(kid(2, WORK_PA + PAGE), PAGE);
	flush(kid(2, WORK_PA + PAGE), PAGE);
	if (has_word("bypass_off"))
		ok(all_blocks_differ(kid(0, WORK_PA + PAGE), PAGE),
		   "NO_ENCRYPT, TME bypass off: KeyID 0 (TME key) does not see the plaintext");
	else
		ok(matches(kid(0, WORK_PA + PAGE), PAGE), "NO_ENCRYPT: KeyID 0 sees the plaintext");
	ok(matches(kid(2, WORK_PA + PAGE), PAGE), "NO_ENCRYPT: KeyID 2 reads its data back");

	/* CLEAR_KEY: back to KeyID 0 behaviour; old ciphertext stays garbage */
	rax = program(3, CMD_DIRECT | alg_ctrl, 0x40, 0x50);
	ok(prog_ok(rax), "PCONFIG SET_KEY_DIRECT KeyID 3");
	fill(kid(3, WORK_PA + 2 * PAGE), PAGE);
	flush(kid(3, WORK_PA + 2 * PAGE), PAGE);
	rax = program(3, CMD_CLEAR | alg_ctrl, 0, 0);
	ok(prog_ok(rax), "PCONFIG CLEAR_KEY KeyID 3");
	ok(same_bytes(kid(3, WORK_PA + 2 * PAGE), kid(0, WORK_PA + 2 * PAGE), PAGE),
	   "CLEAR_KEY: KeyID 3 reads what KeyID 0 reads");
	ok(all_blocks_differ(kid(3, WORK_PA + 2 * PAGE), PAGE),
	   "CLEAR_KEY: data written under the old key reads as garbage");

	/* SET_KEY_RANDOM */
	rax = program(4, CMD_RANDOM | alg_ctrl, 0, 0);
	ok(prog_ok(rax), "PCONFIG SET_KEY_RANDOM KeyID 4");
	fill(kid(4, WORK_PA + 3 * PAGE), PAGE);
	ok(matches(kid(4, WORK_PA + 3 * PAGE), PAGE), "SET_KEY_RANDOM: round trip through KeyID 4");
	flush(kid(4, WORK_PA + 3 * PAGE), PAGE);
	ok(all_blocks_differ(kid(0, WORK_PA + 3 * PAGE), PAGE),
	   "SET_KEY_RANDOM: ciphertext at KeyID 0 once flushed");
	rax = program(4, CMD_RANDOM | alg_ctrl, 0, 0);
	ok(prog_ok(rax) && all_blocks_differ(kid(4, WORK_PA + 3 * PAGE), PAGE),
	   "SET_KEY_RANDOM again: a new key, old data is garbage");

	/*
	 * Stale key: reprogramming with another key and back.  The lines
	 * of a KeyID are flushed before it gets another key, as software
	 * must: clean lines would keep the old plaintext.
	 */
	p1 = kid(5, WORK_PA + 4 * PAGE);
	program(5, CMD_DIRECT | alg_ctrl, 0x60, 0x70);
	fill(p1, PAGE);
	flush(p1, PAGE);
	program(5, CMD_DIRECT | alg_ctrl, 0x61, 0x70);
	ok(all_blocks_differ(p1, PAGE), "KeyID 5 with another data key reads garbage");
	flush(p1, PAGE);
	program(5, CMD_DIRECT | alg_ctrl, 0x60, 0x71);
	ok(all_blocks_differ(p1, PAGE), "KeyID 5 with another tweak key reads garbage");
	flush(p1, PAGE);
	program(5, CMD_DIRECT | alg_ctrl, 0x60, 0x70);
	ok(matches(p1, PAGE), "KeyID 5 with its first key again reads the pattern");
	flush(p1, PAGE);

	/* Highest KeyID */
	rax = program(max_keyid, CMD_DIRECT | alg_ctrl, 0x80, 0x90);
	fill(kid(max_keyid, WORK_PA + 5 * PAGE), PAGE);
	ok(prog_ok(rax) && matches(kid(max_keyid, WORK_PA + 5 * PAGE), PAGE),
	   "highest KeyID reads back");
	flush(kid(max_keyid, WORK_PA + 5 * PAGE), PAGE);
	ok(all_blocks_differ(kid(0, WORK_PA + 5 * PAGE), PAGE),
	   "highest KeyID encrypts");

	/* Both algorithms: an AES-XTS-256 KeyID beside AES-XTS-128 ones */
	if ((algs & 5) == 5) {
		p1 = kid(5, WORK_PA + 6 * PAGE);
		key_len = 32;
		rax = program(5, CMD_DIRECT | ALG_XTS256, 0xc0, 0xd0);
		key_len = 16;
		fill(p1, PAGE);
		ok(prog_ok(rax) && matches(p1, PAGE),
		   "both: an AES-XTS-256 KeyID reads back beside AES-XTS-128 ones");
		flush(p1, PAGE);
		ok(all_blocks_differ(kid(0, WORK_PA + 6 * PAGE), PAGE),
		   "both: the AES-XTS-256 KeyID encrypts");
	}

	test_caches();

	puts_("# host-check pa ");
	put_hex(BUF_PA);
	puts_(" keyid 1 shift ");
	put_dec(keyid_shift);
	putc_('\n');

	if (has_word("bench"))
		run_bench();
	if (has_word("violate"))
		violate();

done:
	if (has_word("kid0")) {
		fill(kid(0, KID0_PA), PAGE);
		ok(matches(kid(0, KID0_PA), PAGE), "the pattern reads back through KeyID 0");
		puts_("# kid0 pattern at ");
		put_hex(KID0_PA);
		putc_('\n');
	}
	puts_("1..");
	put_dec(tests);
	putc_('\n');
	if (has_word("hold")) {
		puts_("# hold\n");
		for (;;)
			__asm__ volatile("cli; hlt");
	}
	exit_qemu(failures ? 1 : 0);
}
