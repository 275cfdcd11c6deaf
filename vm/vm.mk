# The test VM's targets. Included by the top Makefile, or run from the top of
# the tree as "make -f vm/vm.mk TARGET".
#
#   vm-image   build the VM's base image, unless cached (vm/build-image)
#   vm-check   autopkgtest (debian/tests) in the VM with the linux-image .deb
#              from out/ installed (vm/autopkgtest); needs "make deb" first

.PHONY: vm-image vm-check

vm-image:
	@vm/build-image

vm-check: vm-image
	@vm/autopkgtest
