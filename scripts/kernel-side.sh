# SPDX-License-Identifier: MIT
# The kernel's side of a `uzswap run` comparison, shared by scripts/pager-vs-kernel.sh and
# scripts/pager-postgres-vs-kernel.sh (sourced, not run): a cgroup v1 memory cgroup with a
# limit, a 4 GiB swap file on disk, zswap with a given compressor (max_pool_percent 20), all
# under the kernel-test lock, every setting restored on exit (and on INT, TERM, HUP).
#
#   kernel_side_begin CGROUP_DIR SWAP_FILE LIMIT_MiB   # lock, save, swap file, cgroup
#   zswap_on COMPRESSOR / zswap_off
#   vm                                                  # the kernel's swap counters, one line
#   oom_kills                                           # OOM kills in the cgroup so far
#
# A script with more to undo first (a server to stop) defines `before_restore`.

kernel_side_begin() {
    KS_CG=$1 KS_SWAP=$2
    KS_Z=/sys/module/zswap/parameters
    exec 9>/run/lock/uzswap-kernel-tests.lock
    flock 9
    KS_OLD_EN=$(cat $KS_Z/enabled)
    KS_OLD_ALG=$(cat $KS_Z/compressor)
    KS_OLD_POOL=$(cat $KS_Z/max_pool_percent)
    trap kernel_side_restore EXIT
    # A signal must run the restore too (bash skips the EXIT trap when killed by an untrapped one).
    trap 'exit 130' INT
    trap 'exit 143' TERM HUP
    fallocate -l 4G "$KS_SWAP"; chmod 600 "$KS_SWAP"; mkswap -q "$KS_SWAP"; swapon "$KS_SWAP"
    mkdir -p "$KS_CG"; echo $(($3 << 20)) > "$KS_CG/memory.limit_in_bytes"
}

kernel_side_restore() {
    if declare -F before_restore >/dev/null; then before_restore; fi
    swapoff "$KS_SWAP" 2>/dev/null || true; rm -f "$KS_SWAP"
    echo N > $KS_Z/enabled; echo "$KS_OLD_ALG" > $KS_Z/compressor
    echo "$KS_OLD_POOL" > $KS_Z/max_pool_percent; echo "$KS_OLD_EN" > $KS_Z/enabled
    # A task killed just before may still be leaving the cgroup.
    if [ -d "$KS_CG" ]; then rmdir "$KS_CG" 2>/dev/null || { sleep 0.5; rmdir "$KS_CG" 2>/dev/null; } || true; fi
}

zswap_on() {
    echo N > $KS_Z/enabled; echo "$1" > $KS_Z/compressor; echo 20 > $KS_Z/max_pool_percent
    echo Y > $KS_Z/enabled
}

zswap_off() { echo N > $KS_Z/enabled; }

# A process killed inside a pipeline (`sh -c 'prog | sha256sum'`) or a server's child leaves
# no failed status behind: the cgroup's own count says so.
oom_kills() { awk '$1=="oom_kill"{print $2}' "$KS_CG/memory.oom_control"; }

vm() {
    awk '$1=="zswpin"||$1=="zswpout"||$1=="pswpin"||$1=="pswpout"||$1=="pgmajfault"{printf "%s=%s ", $1, $2}' /proc/vmstat
}
