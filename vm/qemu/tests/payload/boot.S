/*
 * MKTME model test payload: multiboot entry, switch to long mode,
 * exception stubs, catch_call() to run code that is expected to fault, and
 * the start-up code of a second CPU.
 */
#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00000003

	.section .multiboot, "a"
	.align 4
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)

	.section .text32, "ax"
	.code32
	.globl _start
_start:
	cli
	mov %ebx, mb_info
	mov $boot_stack_top, %esp

	/* pml4[0] -> pdpt0 -> pd0: identity map 0-1 GiB with 2 MiB pages */
	mov $pdpt0, %eax
	or $0x7, %eax
	mov %eax, pml4
	mov $pd0, %eax
	or $0x7, %eax
	mov %eax, pdpt0
	xor %ecx, %ecx
1:	mov %ecx, %eax
	shl $21, %eax
	or $0x87, %eax		/* present, writable, user, 2 MiB */
	mov %eax, pd0(,%ecx,8)
	inc %ecx
	cmp $512, %ecx
	jne 1b

	mov $pml4, %eax
	mov %eax, %cr3
	mov %cr4, %eax
	or $0x20, %eax		/* PAE */
	mov %eax, %cr4
	mov $0xC0000080, %ecx	/* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax	/* PG, PE */
	mov %eax, %cr0
	lgdt gdt_ptr
	ljmp $0x08, $long_entry

/* The 64-bit data segments of gdt, for the boot CPU and the second CPU. */
	.macro load_data_segments
	mov $0x10, %ax
	mov %ax, %ds
	mov %ax, %es
	mov %ax, %ss
	xor %ax, %ax
	mov %ax, %fs
	mov %ax, %gs
	.endm

	.code64
long_entry:
	load_data_segments
	mov $boot_stack_top, %rsp
	mov mb_info, %edi
	call kmain
2:	cli
	hlt
	jmp 2b

/* Exception stubs: push an error code where the CPU does not, then the vector */
	.macro stub vec
	.align 16
	.if (\vec == 8 || (\vec >= 10 && \vec <= 14) || \vec == 17 || \vec == 21 || \vec == 29 || \vec == 30)
	.else
	pushq $0
	.endif
	pushq $\vec
	jmp exc_common
	.endm

	.align 16
	.globl exc_stubs
exc_stubs:
	.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	stub \v
	.endr

exc_common:
	cmpq $0, catch_active(%rip)
	je 3f
	movq $0, catch_active(%rip)
	mov (%rsp), %rax
	mov %rax, caught_vector(%rip)
	mov 8(%rsp), %rax
	mov %rax, caught_error(%rip)
	mov 16(%rsp), %rax
	mov %rax, caught_rip(%rip)
	mov catch_rsp(%rip), %rsp
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	mov caught_vector(%rip), %rax
	ret
3:	mov %rsp, %rdi
	call unexpected_exception
4:	cli
	hlt
	jmp 4b

/*
 * long catch_call(void (*fn)(void *), void *arg): run fn(arg); return -1
 * if it returns, or the vector of the first exception it raises.
 */
	.globl catch_call
catch_call:
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	mov %rsp, catch_rsp(%rip)
	movq $1, catch_active(%rip)
	mov %rdi, %rax
	mov %rsi, %rdi
	call *%rax
	movq $0, catch_active(%rip)
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	mov $-1, %rax
	ret

/* void enter_user(void (*fn)(void), void *stack_top): iretq to CPL 3 */
	.globl enter_user
enter_user:
	pushq $0x1b		/* user data, RPL 3 */
	pushq %rsi
	pushq $0x2		/* RFLAGS, interrupts off */
	pushq $0x23		/* user code, RPL 3 */
	pushq %rdi
	iretq

/* User mode: PCONFIG must #UD at CPL 3; HLT (#GP) shows it did not */
	.globl user_pconfig
user_pconfig:
	xor %eax, %eax
	.byte 0x0f, 0x01, 0xc5
	hlt

/*
 * A second CPU: ap_trampoline..ap_trampoline_end is copied to
 * AP_TRAMPOLINE (below 1 MiB, page aligned) and started there by
 * INIT-SIPI.  From real mode straight to long mode on the boot CPU's page
 * tables and GDT, then ap_main() on its own stack.
 */
#define AP_TRAMPOLINE 0x8000
	.code16
	.globl ap_trampoline, ap_trampoline_end
ap_trampoline:
	cli
	xor %ax, %ax
	mov %ax, %ds
	mov %cr4, %eax
	or $0x20, %eax		/* PAE */
	mov %eax, %cr4
	mov $pml4, %eax
	mov %eax, %cr3
	mov $0xC0000080, %ecx	/* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	lgdtl AP_TRAMPOLINE + (ap_gdtr - ap_trampoline)
	mov %cr0, %eax
	or $0x80000001, %eax	/* PG, PE */
	mov %eax, %cr0
	ljmpl $0x08, $ap_long
	.align 4
ap_gdtr:
	.word gdt_end - gdt - 1
	.long gdt
ap_trampoline_end:

	.code64
ap_long:
	load_data_segments
	lea ap_stack_top(%rip), %rsp
	call ap_main
5:	cli
	hlt
	jmp 5b

	.data
	.align 8
	.globl gdt
gdt:
	.quad 0
	.quad 0x00AF9A000000FFFF	/* 0x08 kernel code 64 */
	.quad 0x00CF92000000FFFF	/* 0x10 kernel data */
	.quad 0x00CFF2000000FFFF	/* 0x18 user data */
	.quad 0x00AFFA000000FFFF	/* 0x20 user code 64 */
	.quad 0, 0			/* 0x28 TSS, set by C */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.quad gdt
mb_info:
	.long 0
	.align 8
	.globl catch_active, caught_vector, caught_error, caught_rip
catch_active:	.quad 0
catch_rsp:	.quad 0
caught_vector:	.quad 0
caught_error:	.quad 0
caught_rip:	.quad 0

	.bss
	.align 4096
	.globl pml4, pdpt0
pml4:	.skip 4096
pdpt0:	.skip 4096
pd0:	.skip 4096
	.align 16
	.skip 65536
boot_stack_top:
	.skip 16384
ap_stack_top:
