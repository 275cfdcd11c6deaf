// SPDX-License-Identifier: GPL-2.0
/*
 * The smallest out-of-tree module: proves that linux-headers carries
 * what kbuild needs to build one against the packaged kernel.
 *
 * It also uses the inline helpers that depend on the MKTME geometry:
 * __pa() (virt_to_page()), which masks off the offset of a KeyID's copy
 * of the direct mapping, and pte_modify(), which keeps the KeyID bits of
 * an entry. The kernel does not export the variables those read; in a
 * module they call exported accessors instead, and modpost fails the
 * build if a header still names a variable.
 */
#include <linux/gfp.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/module.h>

static int __init mktme_hello_init(void)
{
	struct page *page = alloc_page(GFP_KERNEL);
	bool same;
	pte_t pte;

	if (!page)
		return -ENOMEM;
	pte = pte_modify(mk_pte(page, PAGE_KERNEL), PAGE_KERNEL_RO);
	same = virt_to_page(page_address(page)) == page &&
	       pte_pfn(pte) == page_to_pfn(page);
	__free_page(page);
	if (!same) {
		pr_err("mktme_hello: a page's address or entry lost its page\n");
		return -EINVAL;
	}
	pr_info("mktme_hello: loaded\n");
	return 0;
}

static void __exit mktme_hello_exit(void)
{
	pr_info("mktme_hello: unloaded\n");
}

module_init(mktme_hello_init);
module_exit(mktme_hello_exit);
MODULE_DESCRIPTION("Out-of-tree build check for linux-headers");
MODULE_LICENSE("GPL");
