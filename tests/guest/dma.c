// SPDX-License-Identifier: GPL-2.0
/*
 * Device DMA to and from encrypted memory, the guest half of
 * tests/vm/dma.sh:
 *
 *   dma [--iommu TYPE] DEVICE...
 *
 * For each block DEVICE (a scratch disk the test may overwrite), with
 * O_DIRECT, so that the device itself reads and writes the user's pages:
 *
 *   write    1 MiB written from an encrypted buffer reaches the disk as
 *            plaintext (read back through the page cache, KeyID 0)
 *   read     1 MiB read into an encrypted buffer is the plaintext
 *   mixed    physically adjacent pages of two different KeyIDs in one
 *            request (pwritev/preadv of two iovecs): each page is
 *            written and read through its own KeyID; the block layer
 *            may merge physically contiguous pages into one segment,
 *            which must not give both pages one KeyID
 *
 * and a plain buffer as the control of each. The device's kind (legacy
 * virtio, or the DMA API with VIRTIO_F_ACCESS_PLATFORM, with or without
 * swiotlb=force) is the host's choice; the same checks hold for each.
 *
 * With --iommu, each DEVICE's DMA must first be translated by an IOMMU
 * domain of TYPE (its PCI device's iommu_group/type: "DMA" for iommu-dma
 * with strict invalidation, "identity" for iommu=pt), so that the checks
 * are known to run through that path.
 *
 * First, that the kernel set up swiotlb, whatever the memory size: a
 * device whose DMA mask does not reach the KeyID bits of an address gets
 * encrypted pages through it, and on a machine with no memory above 4 GiB
 * x86 sets swiotlb up only if something asks for it.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mktme.h"

#define LEN (1UL << 20)
#define RW (PROT_READ | PROT_WRITE)
/* Pages of each region for the mixed test, and how many pairs to try. */
#define MIXED_PAGES 512
#define MAX_PAIRS 16

static int fd_direct, fd_cached;

/* Drop the device's page cache, so that a buffered read reads the disk. */
static void drop_cache(void)
{
	fsync(fd_cached);
	posix_fadvise(fd_cached, 0, 0, POSIX_FADV_DONTNEED);
}

static int full(ssize_t n, size_t want, const char *what)
{
	if (n == (ssize_t)want)
		return 1;
	diag("%s: %zd of %zu bytes: %s", what, n, want, n < 0 ? strerror(errno) : "short");
	return 0;
}

/* O_DIRECT write from buf, read back through the page cache. */
static void check_write(const char *dev, const char *kind, uint8_t *buf,
			unsigned int seed)
{
	static uint8_t back[LEN];
	long at = -2;

	fill(buf, LEN, seed);
	if (full(pwrite(fd_direct, buf, LEN, 0), LEN, "O_DIRECT write")) {
		drop_cache();
		if (full(pread(fd_cached, back, LEN, 0), LEN, "buffered read"))
			at = mismatch(back, LEN, seed);
	}
	ok(at == -1, "%s: write: 1 MiB from %s buffer (O_DIRECT) reaches the disk as written (first wrong byte %ld)",
	   dev, kind, at);
}

/* Plaintext written through the page cache, read O_DIRECT into buf. */
static void check_read(const char *dev, const char *kind, uint8_t *buf,
		       unsigned int seed)
{
	static uint8_t src[LEN];
	long at = -2;

	fill(src, LEN, seed);
	memset(buf, 0, LEN);
	if (full(pwrite(fd_cached, src, LEN, 0), LEN, "buffered write")) {
		drop_cache();
		if (full(pread(fd_direct, buf, LEN, 0), LEN, "O_DIRECT read"))
			at = mismatch(buf, LEN, seed);
	}
	ok(at == -1, "%s: read: 1 MiB into %s buffer (O_DIRECT) is what the disk holds (first wrong byte %ld)",
	   dev, kind, at);
}

struct pair {
	uint8_t *a, *b; /* b's page follows a's in physical memory */
};

/*
 * Pages of two regions touched in turn, so that the allocator hands out
 * neighbours: the pairs (page of a, page of b) that are physically
 * adjacent, at most MAX_PAIRS; their count.
 */
static int adjacent_pairs(uint8_t *a, uint8_t *b, struct pair *pairs)
{
	static uint64_t pa[MIXED_PAGES], pb[MIXED_PAGES];
	int i, j, n = 0;

	for (i = 0; i < MIXED_PAGES; i++) {
		a[i * PAGE] = 1;
		b[i * PAGE] = 1;
	}
	if (pagemap(a, MIXED_PAGES, pa) || pagemap(b, MIXED_PAGES, pb))
		return 0;
	for (i = 0; i < MIXED_PAGES && n < MAX_PAIRS; i++)
		for (j = 0; j < MIXED_PAGES && n < MAX_PAIRS; j++)
			if ((pa[i] & PM_PRESENT) && (pb[j] & PM_PRESENT) &&
			    PM_PFN(pb[j]) == PM_PFN(pa[i]) + 1) {
				pairs[n].a = a + (size_t)i * PAGE;
				pairs[n].b = b + (size_t)j * PAGE;
				n++;
			}
	return n;
}

/*
 * Each pair in one O_DIRECT request, written and read: every page on the
 * disk as the CPU sees it, and every page read back as the disk holds it.
 */
static void check_mixed(const char *dev, const char *kind, uint8_t *a,
			uint8_t *b)
{
	static uint8_t back[2 * PAGE], src[2 * PAGE];
	struct pair pairs[MAX_PAIRS];
	int n = adjacent_pairs(a, b, pairs), i, wrong_w = 0, wrong_r = 0;
	struct iovec iov[2];
	off_t off;

	fill(a, MIXED_PAGES * PAGE, 41);
	fill(b, MIXED_PAGES * PAGE, 42);
	if (!n) {
		skip("no physically adjacent pages", "%s: mixed: %s", dev, kind);
		skip("no physically adjacent pages", "%s: mixed: %s", dev, kind);
		return;
	}
	for (i = 0; i < n; i++) {
		off = (off_t)i * 2 * PAGE;
		iov[0] = (struct iovec){ pairs[i].a, PAGE };
		iov[1] = (struct iovec){ pairs[i].b, PAGE };
		if (!full(pwritev(fd_direct, iov, 2, off), 2 * PAGE, "O_DIRECT pwritev")) {
			wrong_w++;
			continue;
		}
		drop_cache();
		if (!full(pread(fd_cached, back, 2 * PAGE, off), 2 * PAGE, "buffered read") ||
		    memcmp(back, pairs[i].a, PAGE) ||
		    memcmp(back + PAGE, pairs[i].b, PAGE))
			wrong_w++;
	}
	ok(!wrong_w, "%s: mixed: %d requests of two physically adjacent %s written (O_DIRECT): %d wrong on the disk",
	   dev, n, kind, wrong_w);
	for (i = 0; i < n; i++) {
		off = (off_t)i * 2 * PAGE;
		fill(src, sizeof(src), 50 + i);
		iov[0] = (struct iovec){ pairs[i].a, PAGE };
		iov[1] = (struct iovec){ pairs[i].b, PAGE };
		if (!full(pwrite(fd_cached, src, sizeof(src), off), sizeof(src), "buffered write")) {
			wrong_r++;
			continue;
		}
		drop_cache();
		if (!full(preadv(fd_direct, iov, 2, off), 2 * PAGE, "O_DIRECT preadv") ||
		    memcmp(pairs[i].a, src, PAGE) ||
		    memcmp(pairs[i].b, src + PAGE, PAGE))
			wrong_r++;
	}
	ok(!wrong_r, "%s: mixed: %d requests read into two physically adjacent %s (O_DIRECT): %d wrong",
	   dev, n, kind, wrong_r);
}

/* swiotlb's slabs, from debugfs: 0 if swiotlb was not set up. */
static long swiotlb_slabs(void)
{
	FILE *f = fopen("/sys/kernel/debug/swiotlb/io_tlb_nslabs", "r");
	long n = 0;

	if (!f) {
		diag("/sys/kernel/debug/swiotlb/io_tlb_nslabs: %s", strerror(errno));
		return 0;
	}
	if (fscanf(f, "%ld", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

/*
 * The type of the IOMMU domain that translates the DMA of block device
 * @dev, as sysfs names it, or "" when no IOMMU group holds the device.
 */
static char *iommu_domain_type(const char *dev, char *buf, size_t size)
{
	char path[PATH_MAX], *real = realpath(dev, NULL);

	buf[0] = 0;
	if (!real) {
		diag("%s: %s", dev, strerror(errno));
		return buf;
	}
	snprintf(path, sizeof(path), "/sys/block/%s/device/../iommu_group/type",
		 basename(real));
	free(real);
	read_line(path, buf, size);
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static uint8_t *encrypted(size_t len, const char *desc)
{
	key_serial_t key = mktme_add(desc, CPU_KEY);
	uint8_t *p = map_anon(len, MAP_PRIVATE);

	if (key == -1 || !p || encrypt_mprotect(p, len, RW, key))
		bail_out("%s: key %d, map %p: %s", desc, key, p, strerror(errno));
	return p;
}

int main(int argc, char **argv)
{
	uint8_t *enc, *plain, *ea, *eb, *pa, *pb;
	const char *iommu = NULL;
	char type[64];
	long slabs;
	int i, first = 1;

	if (argc > 2 && !strcmp(argv[1], "--iommu")) {
		iommu = argv[2];
		first = 3;
	}
	if (argc <= first) {
		fprintf(stderr, "usage: dma [--iommu TYPE] DEVICE...\n");
		return 2;
	}
	plan(2 + (argc - first) * (iommu ? 9 : 8));
	require_mktme();
	slabs = swiotlb_slabs();
	ok(slabs > 0, "swiotlb is set up for devices that cannot reach KeyID addresses (%ld slabs)",
	   slabs);
	enc = encrypted(LEN, "dma-buffer");
	plain = map_anon(LEN, MAP_PRIVATE);
	/* Fresh regions for each device: their pages are placed anew. */
	for (i = first; i < argc; i++) {
		if (iommu) {
			iommu_domain_type(argv[i], type, sizeof(type));
			ok(!strcmp(type, iommu),
			   "%s: its DMA goes through an IOMMU domain of type %s (%s)",
			   argv[i], iommu, type[0] ? type : "no IOMMU group");
		}
		fd_direct = open(argv[i], O_RDWR | O_DIRECT);
		fd_cached = open(argv[i], O_RDWR);
		if (fd_direct < 0 || fd_cached < 0 || !plain)
			bail_out("%s: %s", argv[i], strerror(errno));
		check_write(argv[i], "a plain (control)", plain, 2 * i);
		check_write(argv[i], "an encrypted", enc, 2 * i + 1);
		check_read(argv[i], "a plain (control)", plain, 2 * i + 10);
		check_read(argv[i], "an encrypted", enc, 2 * i + 11);
		ea = encrypted(MIXED_PAGES * PAGE, "dma-mixed-a");
		eb = encrypted(MIXED_PAGES * PAGE, "dma-mixed-b");
		check_mixed(argv[i], "encrypted pages of two KeyIDs", ea, eb);
		pa = map_anon(MIXED_PAGES * PAGE, MAP_PRIVATE);
		pb = map_anon(MIXED_PAGES * PAGE, MAP_PRIVATE);
		if (!pa || !pb)
			bail_out("mmap: %s", strerror(errno));
		check_mixed(argv[i], "plain pages (control)", pa, pb);
		munmap(ea, MIXED_PAGES * PAGE);
		munmap(eb, MIXED_PAGES * PAGE);
		munmap(pa, MIXED_PAGES * PAGE);
		munmap(pb, MIXED_PAGES * PAGE);
		close(fd_direct);
		close(fd_cached);
	}
	return done();
}
