#!/bin/bash
# Device DMA to and from encrypted memory (tests/guest/dma.c: O_DIRECT
# from and into encrypted buffers, and requests that span physically
# adjacent pages of two KeyIDs), in two boots of vm/run:
#   dma          a legacy virtio disk (the device gets guest physical
#                addresses from virtio itself) and one with
#                VIRTIO_F_ACCESS_PLATFORM (the DMA API: dma-direct), as
#                real PCI devices are, behind an Intel IOMMU in
#                pass-through mode (intel_iommu=on iommu=pt), which many
#                servers use
#   dma-swiotlb  the DMA API disk with swiotlb=force: every request
#                bounces through the swiotlb buffer
#   dma-iommu    the DMA API disk behind an Intel IOMMU that translates
#                (intel_iommu=on, strict): iommu-dma maps each request
#                in the IOMMU's page table, KeyID bits included
# About 5 minutes. Needs "make deb" first (vm/run installs the kernel).
#
#   tests/vm/dma.sh         no arguments; TAP on stdout (make check runs it);
#                           vm/run's environment applies (vm/run --help)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/tap.sh
. "$here/../tap.sh"
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/hosted.bash
. "$here/hosted.bash"

legacy=/dev/disk/by-id/virtio-scratch
dma_api=/dev/disk/by-id/virtio-dma-scratch
tap_check "tests/guest/dma.c builds" hosted_build dma
if [ ! -x "$work/dma" ]; then
	tap_plan "$TAP_N"
	exit 1
fi
hosted_run dma hosted_no_handler "" --disk 64 --dma-disk 64 --iommu \
	--append "intel_iommu=on iommu=pt" --copy "$work/dma" -- \
	./dma --iommu identity "$legacy" "$dma_api"
hosted_run dma-swiotlb hosted_no_handler "" --dma-disk 64 \
	--append swiotlb=force --copy "$work/dma" -- ./dma "$dma_api"
hosted_run dma-iommu hosted_no_handler "" --dma-disk 64 --iommu \
	--append "intel_iommu=on iommu.strict=1" --copy "$work/dma" -- \
	./dma --iommu DMA "$dma_api"
tap_plan "$TAP_N"
tap_done
