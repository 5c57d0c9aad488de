#!/bin/sh
# Fake aarch64 CPU description files inside the qemu -L prefix: qemu-user (7.2) looks up
# absolute paths under the prefix first, so these shadow the x86 host's /proc/cpuinfo and
# /sys/devices/system/cpu, which pytorch's cpuinfo (libc10) would otherwise misparse and crash on.
R=${1:?rootfs}
N=2
mkdir -p "$R/proc" "$R/sys/devices/system/cpu"
: > "$R/proc/cpuinfo"
for i in $(seq 0 $((N-1))); do
  cat >> "$R/proc/cpuinfo" <<CPU
processor	: $i
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1

CPU
  d="$R/sys/devices/system/cpu/cpu$i/regs/identification"
  mkdir -p "$d"
  echo 0x00000000413fd0c1 > "$d/midr_el1"
done
echo "0-$((N-1))" > "$R/sys/devices/system/cpu/possible"
echo "0-$((N-1))" > "$R/sys/devices/system/cpu/present"
echo "0-$((N-1))" > "$R/sys/devices/system/cpu/online"
