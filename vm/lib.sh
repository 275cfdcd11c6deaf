# shellcheck shell=bash
# The test VM: base image, kernel-installed overlay, boot, ssh, checks.
# Source it after scripts/lib.sh; do not run it.
#
# Environment: listed in vm/run's usage (vm/run --help), where the users of
# the test VM look for it.

VM_SUITE=bookworm
VM_DIR_TOP=$MKTME_TOP/vm
VM_ACCEL=${MKTME_ACCEL:-tcg}
VM_CPU=${MKTME_CPU:-max,vendor=GenuineIntel}
if [ "$VM_ACCEL" = kvm ]; then
	VM_BOOT_TIMEOUT=${MKTME_BOOT_TIMEOUT:-120}
else
	VM_BOOT_TIMEOUT=${MKTME_BOOT_TIMEOUT:-600}
fi
# A boot whose serial console says nothing for this long before a login
# prompt hangs: the kernel and systemd print all along while they boot
# (under TCG the longest quiet stretch of a good boot is a few seconds).
VM_CONSOLE_QUIET=${MKTME_CONSOLE_QUIET:-120}
# Kernel messages that fail a run: classes of reports, each a name and an
# extended regular expression (grep -E and bash's =~ read them alike). A
# line of the log is in the first class that matches it, so the specific
# come before the generic (a KASAN report is also a "BUG:"). The oops
# headers are the kernel's own ("invalid opcode: 0000 [#1] ..."): user
# space's trap lines ("traps: prog[42] trap invalid opcode ip:...",
# "... general protection fault ip:...") are no kernel report.
# tests/host/dmesg-scan.sh feeds every class sample lines, and benign ones.
VM_DMESG_NAMES=() VM_DMESG_RES=()
vm_dmesg_class() {
	VM_DMESG_NAMES+=("$1")
	VM_DMESG_RES+=("$2")
}
vm_dmesg_class KASAN 'BUG: KASAN'
vm_dmesg_class KFENCE 'BUG: KFENCE'
vm_dmesg_class 'soft lockup' 'soft lockup'
vm_dmesg_class 'hung task' 'blocked for more than [0-9]+ seconds'
vm_dmesg_class 'RCU stall' 'rcu_[a-z]+ self-detected stall|rcu_[a-z]+ detected stalls|rcu: INFO'
vm_dmesg_class lockdep 'possible circular locking|possible recursive locking|inconsistent lock state|possible irq lock inversion|bad unlock balance'
vm_dmesg_class refcount 'refcount_t:'
vm_dmesg_class 'list corruption' 'list_(add|del) corruption'
vm_dmesg_class 'bad page' 'Bad page state|page dumped because'
vm_dmesg_class kmemleak 'suspected memory leak'
vm_dmesg_class UBSAN 'UBSAN:'
vm_dmesg_class BUG 'kernel BUG at|BUG:'
vm_dmesg_class oops 'Oops|general protection fault[^[]*: [0-9a-f]{4} \[#|invalid opcode: [0-9a-f]{4} \[#'
vm_dmesg_class 'call trace' 'Call Trace:'
vm_dmesg_class WARNING 'WARNING:'
vm_dmesg_class INFO 'INFO: '
vm_dmesg_class panic 'Kernel panic'
# All of them in one expression (vm_check_dmesg's context, the callers').
VM_DMESG_BAD=$(IFS='|' && printf '%s' "${VM_DMESG_RES[*]}")
# Lines that match a class but report no bug. Memory offlining
# (do_migrate_range()) dumps a page it could not migrate yet, one a batch
# that failed, and tries again: a page briefly referenced by someone else
# (khugepaged, an LRU batch) fails a pass. An offline that never manages
# fails by itself, which the memory hotplug test checks.
VM_DMESG_BENIGN='page dumped because: migration failure$'
VM_PANIC='Kernel panic - not syncing|end Kernel panic'

vm_log() {
	printf 'vm: %s\n' "$*" >&2
}

# Install the host packages of vm/packages that are missing (as root).
vm_need_host_packages() {
	local p missing=()
	while read -r p; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			missing+=("$p")
	done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$VM_DIR_TOP/packages")
	[ "${#missing[@]}" -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "missing packages; run as root: apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	run_step "apt-get update" vm-apt-update apt-get update
	run_step "apt-get install ${missing[*]}" vm-apt-install \
		apt-get install -y --no-install-recommends "${missing[@]}"
}

# The Debian mirror the host uses, as one-line "deb URI SUITE COMPONENTS"
# entries for the suites of $VM_SUITE (bookworm, -updates, -security).
vm_mirror_lines() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		awk -v RS='' -F '\n' '{
			types = uris = suites = comps = ""; enabled = "yes"
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^[[:space:]]*#/) continue
				n = index($i, ":"); if (!n) continue
				k = tolower(substr($i, 1, n - 1)); v = substr($i, n + 1)
				if (k == "types") types = v
				else if (k == "uris") uris = v
				else if (k == "suites") suites = v
				else if (k == "components") comps = v
				else if (k == "enabled") enabled = v
			}
			if (types !~ /(^|[[:space:]])deb([[:space:]]|$)/ || enabled ~ /no/) next
			nu = split(uris, u, " "); ns = split(suites, s, " ")
			gsub(/^[[:space:]]+|[[:space:]]+$/, "", comps)
			for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++)
				print "deb " u[a] " " s[b] " " comps
		}' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		# Drop [options]; keep "deb URI SUITE COMPONENTS".
		sed -n -e 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]*\)\?/deb /p' "$f"
	done
} 2>/dev/null

vm_mirrors() {
	vm_mirror_lines | awk -v s="$VM_SUITE" '$3 == s || index($3, s "-") == 1 || index($3, s "/") == 1' |
		sort -u
}

# The base image: a directory named after the hash of its recipe.
vm_image_key() {
	cat "$VM_DIR_TOP/build-image" "$VM_DIR_TOP/image-packages" | sha256sum | cut -c1-16
}
vm_image_dir() {
	printf '%s/image/%s\n' "$MKTME_CACHE" "$(vm_image_key)"
}

# Build the base image unless it is cached.
vm_ensure_image() {
	[ -f "$(vm_image_dir)/base.qcow2" ] || "$VM_DIR_TOP/build-image"
}

# The linux-image .deb to test: $MKTME_DEB or the newest in out/.
vm_find_deb() {
	if [ -n "${MKTME_DEB:-}" ]; then
		[ -f "$MKTME_DEB" ] || die "MKTME_DEB=$MKTME_DEB: no such file"
		printf '%s\n' "$MKTME_DEB"
		return
	fi
	local deb
	deb=$(find "$MKTME_TOP/out" -maxdepth 1 -name 'linux-image-*.deb' ! -name '*-dbg_*' \
		-printf '%T@ %p\n' 2>/dev/null | sort -rn | sed -n '1s/^[^ ]* //p')
	[ -n "$deb" ] || die "no linux-image-*.deb in out/ (make deb), or set MKTME_NO_KERNEL=1"
	printf '%s\n' "$deb"
}

# The kernel release a linux-image .deb installs (from its /boot/vmlinuz-*).
vm_deb_release() {
	dpkg-deb -c "$1" | sed -n 's|.* \./boot/vmlinuz-\(.*\)$|\1|p' | head -n 1
}

# ---------------------------------------------------------------------------
# One VM instance. Its state lives in a directory, so that separate processes
# (the autopkgtest setup script) can pick it up again with vm_load:
#   disk.qcow2 console.log qemu.pid port [qmp.sock] [scratch.img]
# Globals: VM_STATE VM_PORT VM_KEY, and for vm_start: VM_MEM VM_CPUS
# VM_MAXCPUS VM_MAXMEM VM_SOCKETS VM_QMP VM_DISK_MB
# VM_DMA_DISK_MB VM_IOMMU VM_KERNEL VM_INITRD VM_CMDLINE
# VM_CACHE_MODE.

VM_MEM=${VM_MEM:-2048}
VM_CPUS=${VM_CPUS:-}
VM_MAXCPUS=${VM_MAXCPUS:-}
VM_MAXMEM=${VM_MAXMEM:-}
VM_SOCKETS=${VM_SOCKETS:-}
VM_QMP=${VM_QMP:-}
VM_DISK_MB=${VM_DISK_MB:-}
VM_DMA_DISK_MB=${VM_DMA_DISK_MB:-}
VM_IOMMU=${VM_IOMMU:-}
VM_KERNEL='' VM_INITRD='' VM_CMDLINE=''
VM_CACHE_MODE=unsafe

vm_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The number of present vCPUs: VM_CPUS, or without it two vCPUs for one
# socket: multi-threaded TCG boots the guest to ssh in about half the time
# of one vCPU (45 s against 80 s on the 2-core machine); one vCPU per
# socket for more sockets: four vCPUs on two host cores are no faster
# (mm.sh: 91 s against 95 s), and the early-boot livelock of vm_boot was
# seen with four.
vm_topology_cpus() {
	local sockets=${VM_SOCKETS:-1}
	if [ -n "${VM_CPUS:-}" ]; then
		printf '%s\n' "$VM_CPUS"
	else
		printf '%s\n' $((sockets > 1 ? sockets : 2))
	fi
}

# What is wrong with MKTME_ALGORITHMS and MKTME_TME_BYPASS, if anything
# (vm/run refuses to start with it, status 2).
vm_cpu_error() {
	case ${MKTME_ALGORITHMS:-aes-xts-128} in
	aes-xts-128 | aes-xts-256 | both) ;;
	*)
		printf 'MKTME_ALGORITHMS=%s: want aes-xts-128, aes-xts-256 or both\n' \
			"$MKTME_ALGORITHMS"
		return
		;;
	esac
	case ${MKTME_TME_BYPASS:-on} in
	on | off) ;;
	*) printf 'MKTME_TME_BYPASS=%s: want on or off\n' "$MKTME_TME_BYPASS" ;;
	esac
}

# The -cpu argument: VM_CPU (MKTME_CPU); with TCG, tme=on,pconfig=on
# unless it names either (the model's -cpu max has them only on request)
# and the cache checker (MKTME_CACHE_STRICT); the algorithms "firmware"
# activated (MKTME_ALGORITHMS: mktme-algorithms=) and TME encryption
# bypass (MKTME_TME_BYPASS: mktme-tme-bypass=) when set and VM_CPU does
# not name them itself.
vm_cpu_arg() {
	local cpu=$VM_CPU
	if [ "$VM_ACCEL" = tcg ] && [[ $cpu != *tme=* && $cpu != *pconfig=* ]]; then
		cpu+=,tme=on,pconfig=on
	fi
	if [ "$VM_ACCEL" = tcg ] && [ "${MKTME_CACHE_STRICT:-1}" = 1 ] &&
		[[ $cpu != *mktme-cache-strict=* ]]; then
		cpu+=,mktme-cache-strict=on
	fi
	if [ -n "${MKTME_ALGORITHMS:-}" ] && [[ $cpu != *mktme-algorithms=* ]]; then
		cpu+=,mktme-algorithms=$MKTME_ALGORITHMS
	fi
	if [ -n "${MKTME_TME_BYPASS:-}" ] && [[ $cpu != *mktme-tme-bypass=* ]]; then
		cpu+=,mktme-tme-bypass=$MKTME_TME_BYPASS
	fi
	printf '%s\n' "$cpu"
}

# What is wrong with VM_SOCKETS, VM_CPUS, VM_MAXCPUS, VM_MEM and VM_MAXMEM
# as a topology, in one line; nothing when they make one. They are
# positive integers (vm/run checks that).
vm_topology_error() {
	local sockets=${VM_SOCKETS:-1} cpus max=${VM_MAXCPUS:-}
	cpus=$(vm_topology_cpus)
	if [ -z "$max" ] && [ "$((cpus % sockets))" -ne 0 ]; then
		echo "--cpus $cpus is not a multiple of --sockets $sockets"
	elif [ -n "$max" ] && [ "$max" -lt "$cpus" ]; then
		echo "--maxcpus $max is less than --cpus $cpus"
	elif [ -n "$max" ] && [ "$((max % sockets))" -ne 0 ]; then
		echo "--maxcpus $max is not a multiple of --sockets $sockets"
	elif [ "$(((VM_MEM / sockets) * sockets))" -ne "$VM_MEM" ]; then
		echo "--mem $VM_MEM does not split over $sockets sockets"
	elif [ -n "${VM_MAXMEM:-}" ] && [ "$VM_MAXMEM" -le "$VM_MEM" ]; then
		echo "--maxmem $VM_MAXMEM is not more than --mem $VM_MEM"
	fi
}

# The -smp and -numa arguments for VM_CPUS, VM_MAXCPUS and VM_SOCKETS.
# With VM_MAXCPUS, the VM has that many CPU slots, VM_MAXCPUS / VM_SOCKETS
# per socket, and the first VM_CPUS of them (socket 0's first) are
# present; the others can be hot-added (QMP device_add). Without it, every
# slot is present: exactly the arguments from before VM_MAXCPUS existed.
vm_topology_args() {
	local sockets=${VM_SOCKETS:-1} cpus slots err
	cpus=$(vm_topology_cpus)
	err=$(vm_topology_error)
	[ -z "$err" ] || die "$err"
	if [ -n "${VM_MAXCPUS:-}" ]; then
		slots=$VM_MAXCPUS
		printf '%s\n' -smp "cpus=$cpus,maxcpus=$slots,sockets=$sockets,cores=$((slots / sockets)),threads=1"
	else
		slots=$cpus
		printf '%s\n' -smp "cpus=$cpus,sockets=$sockets,cores=$((slots / sockets)),threads=1"
	fi
	[ "$sockets" -gt 1 ] || return 0
	# One NUMA node per socket, with the socket's CPU slots (present or
	# not: QEMU wants every possible CPU in a node), the memory split
	# evenly.
	local n per=$((VM_MEM / sockets)) per_cpu=$((slots / sockets))
	for ((n = 0; n < sockets; n++)); do
		printf '%s\n' -object "memory-backend-ram,id=mem$n,size=${per}M" \
			-numa "node,nodeid=$n,memdev=mem$n,cpus=$((n * per_cpu))-$(((n + 1) * per_cpu - 1))"
	done
}

# The QEMU that boots the test VM: MKTME_QEMU, or the MKTME platform model,
# built by vm/qemu/build unless cached. Asked for only when a VM boots:
# vm/build-image, which boots Debian's QEMU, must not build the model.
vm_qemu() {
	if [ -n "${MKTME_QEMU:-}" ]; then
		printf '%s\n' "$MKTME_QEMU"
	else
		"$MKTME_TOP/vm/qemu/build" | tail -n 1
	fi
}

# vm_start STATE_DIR BACKING_QCOW2 [SEED_IMG]
# Make a throw-away overlay on BACKING in STATE_DIR and start QEMU in the
# background. The overlay itself is written in place when BACKING is "-"
# (STATE_DIR/disk.qcow2 must exist then).
vm_start() {
	VM_STATE=$1
	local backing=$2 seed=${3:-} args=() qemu topology_error
	# Checked here, before anything starts: a die in vm_topology_args
	# below would end only the subshell of its process substitution.
	topology_error=$(vm_topology_error)
	[ -z "$topology_error" ] || die "$topology_error"
	mkdir -p "$VM_STATE"
	if [ "$backing" != - ]; then
		qemu-img create -q -f qcow2 -F qcow2 -b "$backing" "$VM_STATE/disk.qcow2"
	fi
	VM_PORT=$(vm_free_port)
	echo "$VM_PORT" >"$VM_STATE/port"
	: >"$VM_STATE/console.log"
	rm -f "$VM_STATE/qemu.pid"
	# shellcheck disable=SC2054 # commas are QEMU's
	# q35 puts a 32 GiB 64-bit PCI hole above RAM, over the KeyID aliases
	# of the MKTME model (6 KeyID bits under 40 physical address bits put
	# KeyID 1 at 16 GiB): keep it small.
	# With VM_MAXMEM, DIMM slots: the model gives the region where DIMMs
	# land KeyID aliases too (vm/qemu patch 7).
	# The model's cache checker: a missing flush ends the run, and
	# qemu-guest-errors.log keeps the model's report (-D keeps QEMU's
	# stderr, qemu.log, open after -daemonize).
	local cpu
	cpu=$(vm_cpu_arg)
	args=(-machine q35 -accel "$VM_ACCEL" -cpu "$cpu"
		-d guest_errors -D "$VM_STATE/qemu-guest-errors.log"
		-m "$VM_MEM${VM_MAXMEM:+,slots=4,maxmem=${VM_MAXMEM}M}"
		-global q35-pcihost.pci-hole64-size=1G
		-nodefaults -display none -vga none)
	# First: a PCI device created before the IOMMU is not behind it. Its
	# page tables hold the KeyID bits (34-39) of the addresses it maps,
	# which the default 39-bit host address width would reserve.
	# shellcheck disable=SC2054 # commas are QEMU's
	[ -z "$VM_IOMMU" ] || args+=(-device intel-iommu,aw-bits=48,intremap=off)
	# shellcheck disable=SC2054 # commas are QEMU's
	args+=(-serial "file:$VM_STATE/console.log"
		-drive "file=$VM_STATE/disk.qcow2,format=qcow2,if=virtio,cache=$VM_CACHE_MODE,discard=unmap"
		-netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$VM_PORT-:22"
		-device virtio-net-pci,netdev=net0
		-device virtio-rng-pci
		-pidfile "$VM_STATE/qemu.pid" -daemonize)
	mapfile -t -O "${#args[@]}" args < <(vm_topology_args)
	[ -z "$seed" ] || args+=(-drive "file=$seed,format=raw,if=virtio,readonly=on")
	[ -z "$VM_QMP" ] || args+=(-qmp "unix:$VM_QMP,server=on,wait=off")
	if [ -n "$VM_DISK_MB" ]; then
		# An empty disk of its own, e.g. a swap device: the guest's udev
		# names it by its serial, /dev/disk/by-id/virtio-scratch. In a PCI
		# slot after the -drive disks', whose devices QEMU creates after
		# every -device: SeaBIOS boots the first disk in slot order.
		qemu-img create -q -f raw "$VM_STATE/scratch.img" "${VM_DISK_MB}M"
		# shellcheck disable=SC2054 # commas are QEMU's
		args+=(-drive "if=none,id=scratch,file=$VM_STATE/scratch.img,format=raw,cache=unsafe"
			-device virtio-blk-pci,drive=scratch,serial=scratch,addr=0x10)
	fi
	if [ -n "$VM_DMA_DISK_MB" ]; then
		# The same, but the device offers VIRTIO_F_ACCESS_PLATFORM (and
		# is modern only), so the guest maps its requests with the DMA
		# API (dma-direct, swiotlb) as it does for real PCI devices:
		# /dev/disk/by-id/virtio-dma-scratch.
		qemu-img create -q -f raw "$VM_STATE/dma-scratch.img" "${VM_DMA_DISK_MB}M"
		# shellcheck disable=SC2054 # commas are QEMU's
		args+=(-drive "if=none,id=dma-scratch,file=$VM_STATE/dma-scratch.img,format=raw,cache=unsafe"
			-device virtio-blk-pci,drive=dma-scratch,serial=dma-scratch,addr=0x11,iommu_platform=on,disable-legacy=on)
	fi
	if [ -n "$VM_KERNEL" ]; then
		args+=(-kernel "$VM_KERNEL" -initrd "$VM_INITRD" -append "$VM_CMDLINE")
	fi
	qemu=$(vm_qemu)
	printf '%q ' "$qemu" "${args[@]}" >"$VM_STATE/qemu.cmd"
	echo >>"$VM_STATE/qemu.cmd"
	# The daemon keeps no descriptor of ours open (pipes, lock files).
	"$qemu" "${args[@]}" </dev/null >"$VM_STATE/qemu.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- || {
		cat "$VM_STATE/qemu.log" >&2
		die "QEMU failed to start: $(cat "$VM_STATE/qemu.cmd")"
	}
}

# Pick up a VM started by another process.
vm_load() {
	VM_STATE=$1
	VM_PORT=$(cat "$VM_STATE/port")
}

vm_pid() {
	cat "$VM_STATE/qemu.pid" 2>/dev/null
}

vm_running() {
	local pid
	pid=$(vm_pid) && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

vm_console_tail() {
	printf -- '--- last 50 lines of the serial console (%s) ---\n' "$VM_STATE/console.log" >&2
	tail -n 50 "$VM_STATE/console.log" | tr -d '\r' >&2
	printf -- '--- end of console ---\n' >&2
}

vm_ssh_opts() {
	printf '%s\n' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=10 \
		-o ServerAliveInterval=15 -o ServerAliveCountMax=8 -i "$VM_KEY"
}

# One ssh connection per VM (per port), shared by vm_ssh and the copies and
# kept for 60 s after its last use: an ssh login to the debug kernel under
# TCG costs 1.7 s, a command on a shared connection 0.3 s. The connection
# ends with the VM's sshd or QEMU.
vm_ssh_shared_opts() {
	printf '%s\n' -o ControlMaster=auto -o "ControlPath=${TMPDIR:-/tmp}/mktme-ssh-%C" \
		-o ControlPersist=60
}

vm_ssh() {
	local opts
	mapfile -t opts < <(vm_ssh_opts && vm_ssh_shared_opts)
	ssh "${opts[@]}" -p "$VM_PORT" root@127.0.0.1 "$@"
}

# vm_copy_in PATH... : copy into /root/ in the guest.
vm_copy_in() {
	local opts
	mapfile -t opts < <(vm_ssh_opts && vm_ssh_shared_opts)
	scp -q -r "${opts[@]}" -P "$VM_PORT" "$@" root@127.0.0.1:/root/
}

# vm_copy_out GUEST_PATH HOST_PATH
vm_copy_out() {
	local opts
	mapfile -t opts < <(vm_ssh_opts && vm_ssh_shared_opts)
	scp -q "${opts[@]}" -P "$VM_PORT" "root@127.0.0.1:$1" "$2"
}

# Fail (after printing the console tail) if the guest's kernel panicked or
# QEMU is gone.
vm_check_alive() {
	if grep -aqE "$VM_PANIC" "$VM_STATE/console.log"; then
		vm_log "kernel panic on the serial console"
		vm_console_tail
		return 1
	fi
	if ! vm_running; then
		vm_log "QEMU exited"
		cat "$VM_STATE/qemu.log" >&2 || true
		vm_check_cache || true
		vm_console_tail
		return 1
	fi
}

# Fail if the model reported cache coherence violations (a missing flush
# of KeyID lines): with MKTME_CACHE_STRICT=0 QEMU only counts them.
vm_check_cache() {
	local log=$VM_STATE/qemu-guest-errors.log n
	n=$(grep -ac '^mktme: cache coherence violation' "$log" 2>/dev/null || true)
	[ "${n:-0}" -eq 0 ] && return 0
	vm_log "the model reported $n cache coherence violations; the first:"
	grep -a '^mktme: cache coherence violation' "$log" | head -n 5 |
		while read -r line; do vm_log "$line"; done
	return 1
}

# Wait until root can log in by ssh; fail at once on a panic, after
# VM_BOOT_TIMEOUT seconds, or when the console has been silent for
# VM_CONSOLE_QUIET seconds before the boot's login prompt (a hang: fail in
# two minutes, not ten). With BOOT_ID, wait for a boot other than it.
vm_wait_ssh() {
	local not_boot=${1:-} start=$SECONDS id size last_size=-1 quiet_since=$SECONDS prompts
	# A reboot's console still holds the previous boot's prompts.
	prompts=$(grep -ac ' login: ' "$VM_STATE/console.log" || true)
	while :; do
		vm_check_alive || return 1
		if id=$(vm_ssh cat /proc/sys/kernel/random/boot_id 2>/dev/null) &&
			[ -n "$id" ] && [ "$id" != "$not_boot" ]; then
			VM_BOOT_SECONDS=$((SECONDS - start))
			return 0
		fi
		if [ $((SECONDS - start)) -ge "$VM_BOOT_TIMEOUT" ]; then
			vm_log "no ssh login after ${VM_BOOT_TIMEOUT}s (MKTME_BOOT_TIMEOUT)"
			vm_console_tail
			return 1
		fi
		size=$(stat -c %s "$VM_STATE/console.log")
		if [ "$size" -ne "$last_size" ]; then
			last_size=$size quiet_since=$SECONDS
		elif [ $((SECONDS - quiet_since)) -ge "$VM_CONSOLE_QUIET" ] &&
			[ "$(grep -ac ' login: ' "$VM_STATE/console.log" || true)" -le "$prompts" ]; then
			vm_log "the serial console has been silent for ${VM_CONSOLE_QUIET}s, with no login prompt: the boot hangs (MKTME_CONSOLE_QUIET)"
			vm_console_tail
			return 1
		fi
		sleep 2
	done
}

# vm_boot STATE_DIR BACKING_QCOW2 [SEED_IMG]: vm_start, then vm_wait_ssh.
# A boot that panics or hangs before ssh is tried once more on a fresh
# overlay (MKTME_BOOT_TRIES, default 2), after its console tail is
# printed. The boots that died at a static-key site just patched by
# text_poke_bp() (a few in a hundred under multi-threaded TCG: QEMU 7.2
# running a translation of the bytes of a moment ago) are fixed in the
# model (vm/qemu patches 10-12, measured by vm/qemu/bootloop). Another,
# rarer early-boot hang remains under MTTCG: the second vCPU never leaves
# the firmware and the first sleeps in the idle loop for good, with no
# console output (vm/qemu/README.md, "Code that the guest rewrites"). A
# kernel that cannot boot fails both tries.
vm_boot() {
	local try tries=${MKTME_BOOT_TRIES:-2}
	for ((try = 1; ; try++)); do
		vm_start "$@"
		vm_wait_ssh && return 0
		vm_kill
		[ "$try" -lt "$tries" ] || return 1
		vm_log "WARNING: boot $try of $tries failed before ssh (console tail above); booting again"
	done
}

vm_boot_id() {
	vm_ssh cat /proc/sys/kernel/random/boot_id
}

# vm_dmesg_reports FILE: the kernel reports in a kernel log (FILE, "-" for
# stdin), one a line as "CLASS: LINE" (CLASS of VM_DMESG_NAMES); fails if
# there is any.
vm_dmesg_reports() {
	local line i class found=0 file=$1
	[ "$file" != - ] || file=/dev/stdin
	while IFS= read -r line; do
		class=report
		for i in "${!VM_DMESG_RES[@]}"; do
			if [[ $line =~ ${VM_DMESG_RES[i]} ]]; then
				class=${VM_DMESG_NAMES[i]}
				break
			fi
		done
		printf '%s: %s\n' "$class" "$line"
		found=1
	done < <(tr -d '\r' <"$file" | grep -aE "$VM_DMESG_BAD" | grep -avE "$VM_DMESG_BENIGN" || true)
	[ "$found" -eq 0 ]
}

# Scan the guest's dmesg; print what was found and fail if anything was.
vm_check_dmesg() {
	local log found
	# kmemleak reports only after a scan (every 10 minutes by itself).
	if [ "${MKTME_KMEMLEAK_SCAN:-1}" = 1 ]; then
		vm_ssh '[ ! -w /sys/kernel/debug/kmemleak ] || echo scan >/sys/kernel/debug/kmemleak' || true
	fi
	log=$(vm_ssh dmesg) || {
		vm_log "cannot read the guest's dmesg"
		vm_check_alive || true
		return 1
	}
	if ! found=$(vm_dmesg_reports - <<<"$log"); then
		vm_log "kernel reports in the guest's dmesg:"
		printf '%s\n' "$found" >&2
		vm_log "--- context (dmesg lines around the first report) ---"
		grep -anE -A 25 -m 1 "$VM_DMESG_BAD" <<<"$log" | head -n 60 >&2
		return 1
	fi
}

# Stop QEMU now (throw-away VMs: nothing to keep).
vm_kill() {
	local pid i
	pid=$(vm_pid) || return 0
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
}

# Shut the guest down cleanly and wait for QEMU to exit.
vm_poweroff() {
	local pid i
	pid=$(vm_pid) || return 0
	vm_ssh 'sync; systemctl poweroff' >/dev/null 2>&1 || true
	for ((i = 0; i < 120; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 1
	done
	vm_log "guest did not power off; killing QEMU"
	vm_kill
}

# ---------------------------------------------------------------------------
# What a .deb installs: its control files and the names and contents of its
# files, not their times, so that the same kernel built again (another clone,
# CI) finds the same cached install.
deb_content_hash() {
	local deb=$1 tmp
	tmp=$(mktemp -d)
	dpkg-deb -R "$deb" "$tmp"
	(cd "$tmp" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16
	rm -rf "$tmp"
}

# The kernel-installed overlay: the base image with our .deb installed as a
# user would, cached by deb_content_hash. Sets VM_KDIR.
vm_ensure_kernel() {
	local deb=$1 imgdir sha
	imgdir=$(vm_image_dir)
	sha=$(deb_content_hash "$deb")
	VM_KDIR=$imgdir/kernel-$sha
	[ -f "$VM_KDIR/disk.qcow2" ] && return 0
	exec 8>"$imgdir/kernel.lock"
	flock 8
	if [ ! -f "$VM_KDIR/disk.qcow2" ]; then
		run_step "install ${deb##*/} in the VM and reboot into it" \
			vm-install-kernel vm_install_kernel "$deb" "$imgdir"
		sed -n 's/^vm: /    /p' "$MKTME_LOGS/vm-install-kernel.log"
	fi
	exec 8>&-
}

# Runs under run_step: boots the base image, installs the .deb, reboots.
# In the default topology, whatever the caller asked for its own boot.
vm_install_kernel() {
	local deb=$1 imgdir=$2 tmp boot_id uname start release
	VM_SOCKETS='' VM_CPUS='' VM_MAXCPUS='' VM_QMP='' VM_DISK_MB=''
	VM_DMA_DISK_MB='' VM_MAXMEM='' VM_IOMMU=''
	tmp=$VM_KDIR.tmp
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# A copy: out/ may be rebuilt meanwhile.
	cp "$deb" "$tmp/"
	deb=$tmp/${deb##*/}
	release=$(vm_deb_release "$deb")
	[ -n "$release" ] || die "${deb##*/}: no /boot/vmlinuz-* in it; not a linux-image package?"
	echo "release: $release"
	qemu-img create -q -f qcow2 -F qcow2 -b ../base.qcow2 "$tmp/disk.qcow2"
	VM_KEY=$imgdir/id_ed25519
	VM_CACHE_MODE=writeback
	trap 'vm_kill' EXIT
	start=$SECONDS
	vm_boot "$tmp" - "$imgdir/seed.img"
	vm_log "time: Debian's kernel booted to ssh in ${VM_BOOT_SECONDS}s"
	vm_ssh uname -r
	# cloud-init restarts sshd while it sets up the first boot: wait until
	# it is done and ssh answers again.
	local tries
	for ((tries = 0; tries < 30; tries++)); do
		vm_ssh 'cloud-init status --wait >/dev/null; cloud-init status --long; true' && break
		sleep 2
	done
	vm_ssh true
	# Our kernel becomes GRUB's default entry by its menu entry id, set
	# before the install so that the package's own update-grub (its
	# postinst hook) writes it: one update-grub, not two, under TCG.
	vm_ssh sh -eux <<EOF
root=\$(grub-probe --target=fs_uuid /)
printf 'GRUB_DEFAULT="gnulinux-advanced-%s>gnulinux-%s-advanced-%s"\n' "\$root" '$release' "\$root" \
	>/etc/default/grub.d/90-mktme-kernel.cfg
EOF
	vm_copy_in "$deb"
	vm_ssh "dpkg -i /root/${deb##*/} && rm -f /root/${deb##*/}"
	vm_ssh grep -q "'set default=\"gnulinux-advanced-.*>gnulinux-$release-advanced-'" /boot/grub/grub.cfg ||
		die "GRUB's default entry is not $release after installing ${deb##*/}"
	# cloud-init has done its work for this instance (ssh key, hostname):
	# later boots skip it, the reboot below included. Under TCG it takes
	# a minute of each boot, even with nothing left to do.
	vm_ssh touch /etc/cloud/cloud-init.disabled
	boot_id=$(vm_boot_id)
	vm_ssh 'systemctl reboot' || true
	vm_log "rebooting into $release"
	# A boot that dies early (see vm_boot) is booted again from the disk.
	vm_wait_ssh "$boot_id" || {
		vm_kill
		vm_log "WARNING: the reboot into $release failed before ssh (console tail above); booting again"
		vm_boot "$tmp" - "$imgdir/seed.img"
	}
	vm_log "time: install + reboot: $((SECONDS - start))s (our kernel booted to ssh in ${VM_BOOT_SECONDS}s)"
	uname=$(vm_ssh uname -r)
	if [ "$uname" != "$release" ]; then
		vm_log "after installing ${deb##*/}, the VM runs $uname, not $release"
		vm_console_tail
		return 1
	fi
	vm_log "uname -r: $uname"
	vm_check_dmesg
	vm_copy_out "/boot/vmlinuz-$release" "$tmp/vmlinuz"
	vm_copy_out "/boot/initrd.img-$release" "$tmp/initrd.img"
	vm_ssh cat /proc/cmdline | sed -e 's/^BOOT_IMAGE=[^ ]* //' >"$tmp/cmdline"
	echo "$release" >"$tmp/release"
	vm_poweroff
	trap - EXIT
	rm -f "$tmp/qemu.pid" "$tmp/port" "$deb"
	rm -rf "$VM_KDIR"
	mv "$tmp" "$VM_KDIR"
	# Keep the three newest kernels installed.
	find "$imgdir" -maxdepth 1 -name 'kernel-*' -type d -printf '%T@ %p\n' |
		sort -rn | sed -n '4,$s/^[^ ]* //p' | xargs -r rm -rf
}

# shellcheck disable=SC2034 # used by the callers
# Prepare what vm_start needs for a test run: sets VM_BACKING VM_KEY VM_SEED
# and, with an extra kernel command line, VM_KERNEL VM_INITRD VM_CMDLINE.
vm_prepare() {
	local append=${1:-} imgdir kdir
	vm_need_host_packages
	vm_ensure_image
	imgdir=$(vm_image_dir)
	VM_KEY=$imgdir/id_ed25519
	VM_SEED=$imgdir/seed.img
	if [ "${MKTME_NO_KERNEL:-0}" = 1 ]; then
		kdir=$imgdir/stock
		VM_BACKING=$imgdir/base.qcow2
	else
		vm_ensure_kernel "$(vm_find_deb)"
		kdir=$VM_KDIR
		VM_BACKING=$VM_KDIR/disk.qcow2
	fi
	if [ -n "${MKTME_VMLINUZ:-}" ]; then
		# A kernel fresh from the build tree, booted in place of the
		# installed one with its initrd: for quick iteration only (the
		# initrd's modules are the installed kernel's).
		[ -f "$MKTME_VMLINUZ" ] || die "MKTME_VMLINUZ=$MKTME_VMLINUZ: no such file"
		VM_KERNEL=$MKTME_VMLINUZ
		VM_INITRD=$kdir/initrd.img
		VM_CMDLINE="$(cat "$kdir/cmdline") $append"
	elif [ -n "$append" ]; then
		VM_KERNEL=$kdir/vmlinuz
		VM_INITRD=$kdir/initrd.img
		VM_CMDLINE="$(cat "$kdir/cmdline") $append"
	fi
}
