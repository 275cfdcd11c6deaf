/*
 * Tiny /init for checking a real kernel on the model: print the CPU flags
 * the kernel saw and the KeyID bits it took from x86_phys_bits, then power
 * off.  Built static, packed in an initramfs by tests/run.py.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>

int main(void)
{
	char line[8192];
	FILE *f;

	mount("proc", "/proc", "proc", 0, NULL);
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "flags", 5) || !strncmp(line, "address sizes", 13)) {
			printf("KINIT %s", line);
		}
		if (!strncmp(line, "address sizes", 13))
			break;
	}
	printf("KINIT done\n");
	fflush(stdout);
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
