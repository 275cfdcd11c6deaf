// SPDX-License-Identifier: GPL-2.0
/*
 * The smallest out-of-tree module: proves that linux-headers carries
 * what kbuild needs to build one against the packaged kernel.
 */
#include <linux/module.h>
#include <linux/init.h>

static int __init mktme_hello_init(void)
{
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
