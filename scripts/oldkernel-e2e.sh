#!/usr/bin/env bash
# On a real old kernel: Debian 12's own Linux 6.1 (linux-image-amd64; no SO_PEERPIDFD, which
# came in 6.5) booted under QEMU on a Debian 12 root made by debootstrap (KVM, or QEMU's own
# emulator TCG where this host's KVM cannot run that kernel at speed: see below), with the project
# copied in from a checkout (`git archive` of its HEAD: no .venv, no build output) and run there
# as the README says, with the guest's python3 (Debian's 3.11) and pip from PyPI:
# scripts/venv.sh (what ./demo.sh and ./test.sh run first), ./demo.sh, the README example
# (examples/first_task.py) against `vdsp up -d` in relay mode and in direct mode
# (VDSP_RPC_MODE=direct), and the live identity, ownership, liveness and busy-host tests with
# pytest. One "check:" line per step, pass or FAIL; exit status 0 only if all passed.
#
#   scripts/oldkernel-e2e.sh                   # as root; builds the image (debootstrap, minutes), boots, runs
#   scripts/oldkernel-e2e.sh --dry-run         # print the steps and the guest's commands, run nothing
#   scripts/oldkernel-e2e.sh --keep            # keep the disk image in build/oldkernel-e2e/image for a fast rerun,
#                                              # and the guest's disk after a passed set-up (its .venv) beside it
#   scripts/oldkernel-e2e.sh --rebuild         # make the image again even when one is cached
#   scripts/oldkernel-e2e.sh --checkout DIR    # the project from DIR's HEAD (default: the checkout of this script)
#   scripts/oldkernel-e2e.sh --verbose         # each step's whole output (else its last lines)
#   scripts/oldkernel-e2e.sh --accel tcg       # QEMU's emulator instead of KVM (auto: KVM where it
#                                              # runs Debian's kernel at speed, see below)
#
# The guest: 2 vCPUs, 4 GiB; its root is an ext4 image made with `mkfs.ext4 -d` from the
# debootstrap root (no loop mount), booted read-write through a qcow2 overlay, so the image
# stays clean and is reused as it is; Debian's kernel and initrd from that root, passed to
# QEMU (-kernel/-initrd); the serial console goes to console.log; user-mode networking (slirp)
# with only ssh forwarded, from 127.0.0.1, which is how the host runs each step. To reach PyPI
# the way this host does, the guest gets the host's extra CA certificates
# (/usr/local/share/ca-certificates, added to its trust store) and pip's `cert` setting
# (/etc/pip.conf: the system bundle); not the host's wheels, indexes or constraints.
# Each step in the guest runs in a systemd scope of its own with a deadline; what it leaves
# running is listed and stopped. A guest that stops answering is killed, and the steps after
# it fail as not run. The logs (each step's output, the SoC's and pytest's logs, the journal,
# the console) are copied back to a directory under /tmp that the last line names, kept
# whatever the result. Nothing else is left behind: no QEMU process, no mount, no overlay,
# and no image unless it was cached on purpose (--keep; a cached image is used by later runs
# and stays; `rm -r build/oldkernel-e2e` removes it).
#
# The set-up (scripts/venv.sh: pip from PyPI, numba's kernels, the sample models) takes minutes
# on KVM and well over an hour under TCG. With --keep, the guest's disk after a passed set-up is
# kept as a layer of its own, image/setup.qcow2 (a qcow2 over root.img), keyed by what the set-up
# depends on (image/setup.key: a hash of the image's recipe and the checkout's pyproject.toml,
# scripts/venv.sh and requirements files): the guest is powered off to save it and booted again
# on it. A later run whose key is the same boots on that layer, replaces the project's sources
# in the guest by the checkout's (keeping .venv, the sample models and the compiled caches) and
# runs scripts/venv.sh again, which then only checks that all is current.

# The whole script is one { } block, read before any of it runs: editing the file meanwhile
# cannot change a run in progress.
{
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DRY_RUN=0
KEEP=0
REBUILD=0
VERBOSE=0
TAIL=12
CHECKOUT=$ROOT
ACCEL=auto
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) DRY_RUN=1; shift ;;
        --keep) KEEP=1; shift ;;
        --rebuild) REBUILD=1; shift ;;
        --verbose) VERBOSE=1; shift ;;
        --accel)
            [ $# -ge 2 ] || { echo "oldkernel-e2e.sh: --accel needs auto, kvm or tcg" >&2; exit 2; }
            ACCEL=$2; shift 2 ;;
        --checkout)
            [ $# -ge 2 ] || { echo "oldkernel-e2e.sh: --checkout needs a directory" >&2; exit 2; }
            CHECKOUT=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "oldkernel-e2e.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

SUITE=bookworm
MIRROR=${VDSP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# systemd as init (scopes for the steps, networkd for DHCP, logind for XDG_RUNTIME_DIR), the
# kernel and its initramfs tools, ssh, Debian's python3 with venv; no compiler (the README's
# set-up then runs the pure Python modules) and no python3-pip (pip comes with the venv)
PACKAGES=systemd-sysv,udev,dbus,libpam-systemd,linux-image-amd64,initramfs-tools,zstd,openssh-server,python3,python3-venv,ca-certificates,procps,iproute2,kmod
VCPUS=2
MEM_MB=4096
DISK_SIZE=12G
STATE=$ROOT/build/oldkernel-e2e
IMAGE=$STATE/image       # the cache: root.img, vmlinuz, initrd.img, the ssh key, recipe
RUN=$STATE/run           # this run's overlay and QEMU pid file; always removed
PROJECT_OK=0             # 1: the project and the step runner are in the guest
SETUP_CACHED=0           # 1: booted on image/setup.qcow2, the disk of a passed set-up (--keep)
T_START=$(date +%s%N)
STEP=0
FAILED=0
GUEST_UP=0
QEMU_PID=
QEMU_PID_SEEN=
MADE_IMAGE=0
RESULTS=()

elapsed() { local ds=$((($(date +%s%N) - $1) / 100000000)); printf '%d.%d' $((ds / 10)) $((ds % 10)); }   # seconds since $1 (ns)
step() { STEP=$((STEP + 1)); printf '\n==> [%d/%d] %s  (t=%ss)\n' "$STEP" "$STEPS" "$*" "$(elapsed "$T_START")"; }
check() {   # check PASS|FAIL TEXT: one line per step, and the summary at the end
    local line
    if [ "$1" = PASS ]; then line="check: pass: $2"; else line="check: FAIL: $2"; FAILED=1; fi
    echo "$line"
    RESULTS+=("$line")
}
die() { printf 'FAILED: %s\n' "$*" >&2; FAILED=1; exit 1; }
show() {   # show FILE: its last lines (all with --verbose), indented
    if [ "$VERBOSE" = 1 ]; then sed 's/^/  | /' "$1"; else tail -n "$TAIL" "$1" | sed 's/^/  | /'; fi
}

# --- KVM or TCG ------------------------------------------------------------------------------
# KVM where it runs an unmodified kernel at speed. A host whose /dev/kvm is PVM (kvm_pvm: the
# paravirtualized KVM of nested sandboxes) runs only kernels built as PVM guests at speed:
# Debian's kernel there runs its ring 0 under instruction emulation (in one try, 4 min of boot
# reached 64 s of kernel time, still in memory set-up), so TCG, QEMU's own emulator, is used
# (the same boot to a login prompt: 3.5 min), with every deadline scaled by SLOW.
ACCEL_WHY=
if [ "$ACCEL" = auto ]; then
    if [ -d /sys/module/kvm_pvm ]; then ACCEL=tcg ACCEL_WHY="/dev/kvm is PVM (kvm_pvm), which runs Debian's kernel only by emulation"
    elif [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then ACCEL=kvm ACCEL_WHY="/dev/kvm is usable"
    else ACCEL=tcg ACCEL_WHY="no usable /dev/kvm"; fi
fi
case $ACCEL in
    kvm) SLOW=1 BOOT_DEADLINE=240 CPU_ARGS=(-accel kvm -cpu host) ;;
    tcg) SLOW=4 BOOT_DEADLINE=900 CPU_ARGS=(-accel tcg,thread=multi -cpu max) ;;
    *) echo "oldkernel-e2e.sh: --accel is auto, kvm or tcg, not $ACCEL" >&2; exit 2 ;;
esac

# --- the guest's steps: name, deadline (s), title, commands (bash, in the project's copy) -------
# `bounded S CMD...` (defined by the step runner) runs one command with a deadline of its own,
# prints it and its exit status, and carries on: the later commands of the step still run.
G_NAMES=() G_DEADLINES=() G_TITLES=() G_CMDS=()
t() { echo $(($1 * SLOW)); }    # a deadline of S s on KVM, scaled for TCG
# every step starts with the SoC's own start timeout (vdsp up, the tests' SoCs) scaled the same way, and the
# SDK's default task wait (Soc.call: the samples) 10 times longer again (an operator runs ~50x slower under TCG)
guest_step_def() { G_NAMES+=("$1"); G_DEADLINES+=("$2"); G_TITLES+=("$3")
                   G_CMDS+=("export VDSP_START_TIMEOUT=$(t 60) VDSP_TASK_WAIT_MS=$(t 100)000"$'\n'"$4"); }
guest_step_def setup "$(t 2460)" "set up .venv: scripts/venv.sh, the first command of ./demo.sh (pip install -e '.[test]' from PyPI)" \
"bounded $(t 2400) bash scripts/venv.sh"
guest_step_def demo "$(t 480)" "./demo.sh: vdsp up -d, status, the smoke, CV and NN samples, vdsp down" \
"bounded $(t 420) ./demo.sh"
guest_step_def example-relay "$(t 420)" "README example in relay mode: vdsp up -d, examples/first_task.py, vdsp down" \
"bounded $(t 180) .venv/bin/vdsp up -d
bounded $(t 120) .venv/bin/python examples/first_task.py
bounded $(t 90) .venv/bin/vdsp down"
guest_step_def example-direct "$(t 420)" "README example in direct mode (VDSP_RPC_MODE=direct): vdsp up -d, examples/first_task.py, vdsp down" \
"export VDSP_RPC_MODE=direct
bounded $(t 180) .venv/bin/vdsp up -d
bounded $(t 120) .venv/bin/python examples/first_task.py
bounded $(t 90) .venv/bin/vdsp down"
# pytest's own limit per test (pyproject: 300 s) scaled too, so that a slow emulator is not a hang
for mod in integration/test_live_identity integration/test_live_ownership integration/test_live_liveness integration/test_busy_host board/test_ownership; do
    guest_step_def "$mod" "$(t 660)" "pytest tests/$mod.py" \
"bounded $(t 600) .venv/bin/python -m pytest -q -p no:cacheprovider -n 0 -o timeout=$(t 300) tests/$mod.py"
done
STEPS=$((6 + ${#G_NAMES[@]} + 2))

# The step runner, copied into the guest as /root/e2e/step: `step NAME DEADLINE < COMMANDS`.
read -r -d '' GUEST_RUNNER <<'RUNNER' || true
#!/bin/bash
# step NAME DEADLINE < COMMANDS: the commands, by bash in /root/vdsp-sim, in a systemd scope of
# their own, for at most DEADLINE s; then what they left running is listed and stopped, and the
# SoC logs they made are copied to /root/e2e/logs/NAME/. Exit status: the first failure's.
name=$1 deadline=$2
cmds=$(cat)
mkdir -p "/root/e2e/logs/$name"
touch "/root/e2e/logs/$name/.start"
cat > "/root/e2e/logs/$name/commands.sh" <<EOF
cd /root/vdsp-sim
status=0
bounded() {   # bounded S CMD...: CMD with a deadline of S s; its exit status is remembered, the step goes on
    local t0=\$SECONDS rc=0
    printf '+ %s\n' "\${*:2}"
    timeout -k 10 "\$1" "\${@:2}" < /dev/null || rc=\$?
    case \$rc in
        0) printf '  -> exit 0 (%d s)\n' \$((SECONDS - t0)) ;;
        124|137) printf '  -> TIMEOUT: no end within %d s (exit %d)\n' "\$1" \$rc ;;
        *) printf '  -> exit %d (%d s)\n' \$rc \$((SECONDS - t0)) ;;
    esac
    [ \$status != 0 ] || status=\$rc
    return 0
}
$cmds
exit \$status
EOF
unit=e2e-$name-$$
rc=0
systemd-run --scope --quiet --collect --unit="$unit" -- \
    timeout -k 10 "$deadline" bash "/root/e2e/logs/$name/commands.sh" > "/root/e2e/logs/$name/output.log" 2>&1 || rc=$?
cat "/root/e2e/logs/$name/output.log"
[ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "TIMEOUT: the step did not end within $deadline s"
cg=$(systemctl show -P ControlGroup "$unit.scope" 2>/dev/null)
if [ -n "$cg" ] && [ -s "/sys/fs/cgroup$cg/cgroup.procs" ]; then
    echo "left running after the step (stopped now):"
    while read -r pid; do ps -o pid=,args= -p "$pid" | cut -c1-160 | sed 's/^/    /'; done < "/sys/fs/cgroup$cg/cgroup.procs"
    systemctl stop "$unit.scope"
fi
# the SoC logs this step wrote: the default runtime directory, demo.sh's, pytest's
for log in $(find /run/user/0/vdsp /tmp/vdsp-0 /tmp/vdsp-demo.* /tmp/pytest-of-root -name '*.log' -path '*/log/*' \
                  -newer "/root/e2e/logs/$name/.start" 2>/dev/null); do
    dest=/root/e2e/logs/$name/soc${log//\//_}
    cp "$log" "$dest"
    if [ "$rc" != 0 ]; then echo "--- ${log}, last lines:"; tail -n 3 "$log" | cut -c1-400 | sed 's/^/    /'; fi
done
exit "$rc"
RUNNER

# --- QEMU and ssh -----------------------------------------------------------------------------
SSH=()     # ssh to the guest's root, set once QEMU runs; every use is under `timeout`
set_ssh() {
    SSH=(ssh -i "$IMAGE/id_ed25519" -p "$1" -o BatchMode=yes -o StrictHostKeyChecking=no
         -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=10
         -o ServerAliveInterval=15 -o ServerAliveCountMax=8 root@127.0.0.1)
}

stop_qemu() {   # stop_qemu: ask the guest to power off (when it answers), else kill QEMU; by its pid only
    [ -n "$QEMU_PID" ] || return 0
    if kill -0 "$QEMU_PID" 2>/dev/null && [ "$GUEST_UP" = 1 ]; then
        timeout 20 "${SSH[@]}" 'systemctl poweroff' >/dev/null 2>&1 || true
        local deadline=$((SECONDS + $(t 60)))
        while kill -0 "$QEMU_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
    fi
    if kill -0 "$QEMU_PID" 2>/dev/null; then
        echo "qemu: the guest did not power off; killing QEMU (pid $QEMU_PID)"
        kill -TERM "$QEMU_PID" 2>/dev/null || true
        for _ in $(seq 1 20); do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$QEMU_PID" 2>/dev/null || true
    fi
    wait "$QEMU_PID" 2>/dev/null || true
    echo "qemu: stopped (pid $QEMU_PID)"
    QEMU_PID=
    GUEST_UP=0
}

# --- the image ------------------------------------------------------------------------------
# What goes into the root file system besides debootstrap's packages; its text is part of the
# recipe, so a change to it makes the cached image again.
configure_root() {
    local r=$1
    echo oldkernel > "$r/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 oldkernel\n' > "$r/etc/hosts"
    echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$r/etc/fstab"
    # slirp: DHCP from 10.0.2.2, its DNS forwarder at 10.0.2.3 (net.ifnames=0: eth0)
    printf '[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n' > "$r/etc/systemd/network/80-slirp.network"
    chroot "$r" systemctl enable systemd-networkd >/dev/null 2>&1
    rm -f "$r/etc/resolv.conf"; echo 'nameserver 10.0.2.3' > "$r/etc/resolv.conf"
    # root's /run/user/0 stays between the ssh sessions of the steps
    mkdir -p "$r/var/lib/systemd/linger"; touch "$r/var/lib/systemd/linger/root"
    install -d -m 700 "$r/root/.ssh"
    install -m 600 "$IMAGE/id_ed25519.pub" "$r/root/.ssh/authorized_keys"
    # PyPI the way this host reaches it: its extra CAs in the trust store, pip told to use that store
    if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/"
    fi
    chroot "$r" update-ca-certificates >/dev/null 2>&1
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$r/etc/pip.conf"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
}

recipe() {
    printf '%s\n' "$SUITE" "$MIRROR" "$PACKAGES" "$DISK_SIZE"
    declare -f configure_root
    cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true
}

build_image() {
    local rootfs=$STATE/rootfs
    rm -rf --one-file-system "$IMAGE" "$rootfs"
    mkdir -p "$IMAGE"
    MADE_IMAGE=1
    ssh-keygen -q -t ed25519 -N '' -C oldkernel-e2e -f "$IMAGE/id_ed25519"
    echo "image: debootstrap $SUITE from $MIRROR (minbase + $PACKAGES)"
    local t=$(date +%s%N)
    timeout 2400 debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR" \
        > "$LOGDIR/debootstrap.log" 2>&1 || { tail -20 "$LOGDIR/debootstrap.log" >&2; die "debootstrap failed (log: $LOGDIR/debootstrap.log)"; }
    echo "  debootstrap: $(elapsed "$t") s, $(du -sh --one-file-system "$rootfs" | cut -f1)"
    configure_root "$rootfs"
    local kernel initrd
    kernel=$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -1)
    initrd=$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -1)
    [ -f "$kernel" ] && [ -f "$initrd" ] || die "no kernel or initrd in $rootfs/boot"
    cp "$kernel" "$IMAGE/vmlinuz"; cp "$initrd" "$IMAGE/initrd.img"
    basename "$kernel" | sed 's/^vmlinuz-//' > "$IMAGE/kernel-release"
    t=$(date +%s%N)
    timeout 900 mkfs.ext4 -q -F -L oldkernel -d "$rootfs" "$IMAGE/root.img.part" "$DISK_SIZE" \
        || die "mkfs.ext4 -d failed"
    mv "$IMAGE/root.img.part" "$IMAGE/root.img"
    rm -rf --one-file-system "$rootfs"
    recipe | sha256sum | cut -d' ' -f1 > "$IMAGE/recipe.sha256"
    echo "  root.img: ext4 of $DISK_SIZE ($(du -h "$IMAGE/root.img" | cut -f1) used) by mkfs.ext4 -d in $(elapsed "$t") s;" \
         "kernel $(cat "$IMAGE/kernel-release")"
}

# --- booting ----------------------------------------------------------------------------------
setup_key() {   # what the set-up's result depends on: the image, and the checkout's set-up inputs
    {
        cat "$IMAGE/recipe.sha256"
        local f
        for f in pyproject.toml scripts/venv.sh $(git -C "$CHECKOUT" ls-tree --name-only HEAD | grep '^requirements' || true); do
            echo "== $f"; git -C "$CHECKOUT" show "HEAD:$f"
        done
    } | sha256sum | cut -d' ' -f1
}

boot_guest() {   # a new overlay (over setup.qcow2 when SETUP_CACHED=1, else root.img), QEMU, ssh up
    rm -f "$RUN/overlay.qcow2"
    if [ "$SETUP_CACHED" = 1 ]; then
        qemu-img create -q -f qcow2 -b "$IMAGE/setup.qcow2" -F qcow2 "$RUN/overlay.qcow2"
    else
        qemu-img create -q -f qcow2 -b "$IMAGE/root.img" -F raw "$RUN/overlay.qcow2"
    fi
    SSH_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    set_ssh "$SSH_PORT"
    local args=("${QEMU_ARGS[@]//\$PORT/$SSH_PORT}")
    args=("${args[@]//\$LOGDIR/$LOGDIR}")
    [ ! -f "$LOGDIR/console.log" ] || mv "$LOGDIR/console.log" "$LOGDIR/console-$(date +%s).log"
    local t0; t0=$(date +%s%N)
    nice -n 5 qemu-system-x86_64 "${args[@]}" -pidfile "$RUN/qemu.pid" > "$LOGDIR/qemu.log" 2>&1 &
    QEMU_PID=$! QEMU_PID_SEEN=$!
    local deadline=$((SECONDS + BOOT_DEADLINE))
    until timeout 15 "${SSH[@]}" true 2>/dev/null; do
        kill -0 "$QEMU_PID" 2>/dev/null || { cat "$LOGDIR/qemu.log"; tail -20 "$LOGDIR/console.log"; QEMU_PID=; die "QEMU exited"; }
        [ $SECONDS -lt $deadline ] || { tail -20 "$LOGDIR/console.log"; die "no ssh answer within $BOOT_DEADLINE s of QEMU's start"; }
        sleep 2
    done
    GUEST_UP=1
    BOOT_TOOK=$(elapsed "$t0")
}

save_setup_layer() {   # after a passed set-up, with --keep: the guest's disk as image/setup.qcow2, then boot on it
    echo "setup: saving the guest's disk as the set-up layer (--keep): power off, keep the overlay, boot again on it"
    stop_qemu
    if [ "$SETUP_CACHED" = 1 ]; then   # the overlay and the old layer made one: rebased onto root.img (safe mode copies the old layer's data in)
        qemu-img rebase -q -f qcow2 -b "$IMAGE/root.img" -F raw "$RUN/overlay.qcow2"
        mv "$RUN/overlay.qcow2" "$IMAGE/setup.qcow2.part"
    else
        mv "$RUN/overlay.qcow2" "$IMAGE/setup.qcow2.part"
    fi
    mv "$IMAGE/setup.qcow2.part" "$IMAGE/setup.qcow2"
    setup_key > "$IMAGE/setup.key"
    echo "setup: $IMAGE/setup.qcow2 ($(du -h "$IMAGE/setup.qcow2" | cut -f1)), key $(cut -c1-12 "$IMAGE/setup.key")"
    SETUP_CACHED=1
    boot_guest
    echo "setup: booted again on it in $BOOT_TOOK s"
}

# --- cleanup: runs on every exit ------------------------------------------------------------
cleanup() {
    local status=$?
    [ "$DRY_RUN" = 1 ] && exit "$status"
    [ "$status" = 0 ] || FAILED=1
    trap - EXIT INT TERM
    printf '\n==> cleanup  (t=%ss)\n' "$(elapsed "$T_START")"
    stop_qemu
    # debootstrap mounts /proc and /sys in its root while it runs: none may stay
    local m
    for m in $(awk -v p="$STATE/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r); do
        umount -l "$m" && echo "cleanup: unmounted $m"
    done
    rm -rf --one-file-system "$RUN" "$STATE/rootfs"
    if [ -f "$IMAGE/keep" ]; then
        echo "cleanup: the image stays cached in $IMAGE (--keep; rm -r $STATE removes it)"
    else
        rm -rf --one-file-system "$IMAGE"
        rmdir "$STATE" 2>/dev/null || true
        echo "cleanup: removed the image ($IMAGE)"
    fi
    if [ -n "$QEMU_PID_SEEN" ] && kill -0 "$QEMU_PID_SEEN" 2>/dev/null; then
        echo "LEFT: QEMU pid $QEMU_PID_SEEN"; FAILED=1
    fi
    if awk -v p="$STATE/" 'index($2, p) == 1' /proc/mounts | grep -q .; then echo "LEFT: mounts under $STATE"; FAILED=1; fi
    printf '\n==> summary\n'
    local line
    for line in "${RESULTS[@]}"; do echo "$line"; done
    if [ "$FAILED" = 0 ]; then
        printf '\noldkernel-e2e: PASSED in %ss; logs in %s\n' "$(elapsed "$T_START")" "$LOGDIR"
        exit 0
    fi
    printf '\noldkernel-e2e: FAILED after %ss; logs in %s\n' "$(elapsed "$T_START")" "$LOGDIR"
    exit 1
}
if [ "$DRY_RUN" = 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "oldkernel-e2e.sh: needs root (debootstrap chroots; /dev/kvm)" >&2; exit 1; }
    CHECKOUT=$(cd "$CHECKOUT" && git rev-parse --show-toplevel) || { echo "oldkernel-e2e.sh: $CHECKOUT is not a git checkout" >&2; exit 2; }
    LOGDIR=$(mktemp -d /tmp/oldkernel-e2e.XXXXXX)
    trap cleanup EXIT
    trap 'exit 130' INT TERM
fi

# --- 1. host tools ----------------------------------------------------------------------------
step "host tools: qemu-system-x86 and qemu-utils, debootstrap (Debian's, installed if missing); KVM or TCG"
if [ "$DRY_RUN" = 0 ]; then
    missing=()
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    command -v qemu-img >/dev/null || missing+=(qemu-utils)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v ssh >/dev/null || missing+=(openssh-client)
    command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "tools: apt-get install ${missing[*]}"
        timeout 900 apt-get install -y -qq "${missing[@]}" > "$LOGDIR/apt.log" 2>&1 \
            || { tail "$LOGDIR/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
    fi
    [ "$ACCEL" = tcg ] || [ -w /dev/kvm ] || die "/dev/kvm is missing or not writable: --accel tcg runs without it"
    echo "  accelerator: $ACCEL ($ACCEL_WHY); deadlines x$SLOW"
    echo "  $(qemu-system-x86_64 --version | head -1); $(debootstrap --version)"
    check PASS "host tools; accelerator $ACCEL"
fi

# --- 2. the image -----------------------------------------------------------------------------
step "image: debootstrap $SUITE + linux-image-amd64 (Debian's 6.1), then mkfs.ext4 -d (cached with --keep)"
if [ "$DRY_RUN" = 1 ]; then
    echo "  + debootstrap --variant=minbase --include=$PACKAGES $SUITE build/oldkernel-e2e/rootfs $MIRROR"
    echo "  + mkfs.ext4 -d build/oldkernel-e2e/rootfs build/oldkernel-e2e/image/root.img $DISK_SIZE"
else
    T=$(date +%s%N)
    if [ "$REBUILD" = 0 ] && [ -f "$IMAGE/root.img" ] && [ -f "$IMAGE/recipe.sha256" ] \
         && [ "$(cat "$IMAGE/recipe.sha256")" = "$(recipe | sha256sum | cut -d' ' -f1)" ]; then
        echo "image: cached in $IMAGE (made $(date -r "$IMAGE/root.img" '+%F %T'); --rebuild makes it again)"
    else
        [ -f "$IMAGE/root.img" ] && echo "image: the cached image is of another recipe or --rebuild: made again"
        rm -f "$IMAGE/keep"
        build_image
    fi
    if [ "$KEEP" = 1 ]; then touch "$IMAGE/keep"; fi
    check PASS "image with kernel $(cat "$IMAGE/kernel-release") ready in $(elapsed "$T") s"
fi

# --- 3. boot ----------------------------------------------------------------------------------
step "boot: QEMU ($ACCEL: $ACCEL_WHY), $VCPUS vCPUs, $((MEM_MB / 1024)) GiB, the root on a qcow2 overlay of root.img, serial console to console.log, slirp"
QEMU_ARGS=(-name vdsp-oldkernel-e2e "${CPU_ARGS[@]}" -smp "$VCPUS" -m "$MEM_MB"
           -kernel "$IMAGE/vmlinuz" -initrd "$IMAGE/initrd.img"
           -append "root=/dev/vda rw console=ttyS0,115200 net.ifnames=0 panic=5"
           -drive "file=$RUN/overlay.qcow2,format=qcow2,if=virtio"
           -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:\$PORT-:22" -device virtio-net-pci,netdev=n0
           -object rng-random,id=rng0,filename=/dev/urandom -device virtio-rng-pci,rng=rng0
           -display none -monitor none -serial "file:\$LOGDIR/console.log" -no-reboot)
if [ "$DRY_RUN" = 1 ]; then
    echo "  + qemu-img create -f qcow2 -b root.img -F raw overlay.qcow2"
    echo "  + qemu-system-x86_64 ${QEMU_ARGS[*]}"
    echo "  then ssh root@127.0.0.1 -p \$PORT until it answers (at most $BOOT_DEADLINE s)"
else
    rm -rf --one-file-system "$RUN"; mkdir -p "$RUN"
    setup_key=$(setup_key)
    if [ "$REBUILD" = 0 ] && [ -f "$IMAGE/setup.qcow2" ] && [ "$(cat "$IMAGE/setup.key" 2>/dev/null)" = "$setup_key" ]; then
        SETUP_CACHED=1
        echo "boot: on the cached set-up layer $IMAGE/setup.qcow2 (made $(date -r "$IMAGE/setup.qcow2" '+%F %T'); key ${setup_key:0:12})"
    elif [ -f "$IMAGE/setup.qcow2" ]; then
        echo "boot: the cached set-up layer is of another key (pyproject.toml, scripts/venv.sh, the image) or --rebuild: not used"
    fi
    boot_guest
    grep -m1 -a 'Linux version' "$LOGDIR/console.log" | sed 's/^\[[^]]*\] */  console: /' | cut -c1-160
    check PASS "guest booted, ssh answered $BOOT_TOOK s after QEMU's start (pid $QEMU_PID, ssh on 127.0.0.1:$SSH_PORT)"
fi

# --- 4. the kernel ----------------------------------------------------------------------------
step "kernel: the guest runs Debian's 6.1, which has pidfd_open (5.3) but no SO_PEERPIDFD (6.5)"
KERNEL_PROBE='
import errno, os, socket
a, b = socket.socketpair()
try:
    a.getsockopt(socket.SOL_SOCKET, 77)                  # SO_PEERPIDFD
    peerpidfd = "yes"
except OSError as exc:
    peerpidfd = "no (" + errno.errorcode[exc.errno] + ")"
fd = os.pidfd_open(os.getpid())
os.close(fd)
print("uname -r:", os.uname().release, "| SO_PEERPIDFD:", peerpidfd, "| pidfd_open: yes")
'
printf '  + uname -r; python3 -c "<getsockopt(SO_PEERPIDFD) on a socketpair; pidfd_open>"\n'
if [ "$DRY_RUN" = 0 ]; then
    out=$(timeout 60 "${SSH[@]}" python3 - <<<"$KERNEL_PROBE" 2>&1) || true
    echo "  $out"
    if [[ $out == *"uname -r: 6.1."*"SO_PEERPIDFD: no"* ]]; then check PASS "kernel: $out"
    else check FAIL "kernel: not the old kernel this script is for: $out"; fi
fi

# --- 5. the project ---------------------------------------------------------------------------
step "project: git archive of HEAD of the checkout into the guest's /root/vdsp-sim (no .venv, no build output)"
printf '  + git -C CHECKOUT archive HEAD | ssh guest tar -x -C /root/vdsp-sim\n'
if [ "$DRY_RUN" = 0 ]; then
    head=$(git -C "$CHECKOUT" rev-parse --short HEAD)
    if [ "$SETUP_CACHED" = 1 ]; then
        # the set-up layer's sources go, what the set-up made stays: the venvs, the sample models, the caches
        PROJECT_CLEAR='rm -rf /root/e2e && mkdir -p /root/vdsp-sim && cd /root/vdsp-sim &&
            find . -mindepth 1 -maxdepth 1 ! -name ".venv*" ! -name vdsp_sim -exec rm -rf {} + &&
            { [ ! -d vdsp_sim ] || find vdsp_sim -type f ! -path "vdsp_sim/models/*" ! -path "*/__pycache__/*" -delete; } && cd /'
        echo "  the guest's .venv, sample models and __pycache__ (of the set-up layer) kept; the sources replaced"
    else
        PROJECT_CLEAR='rm -rf /root/vdsp-sim /root/e2e'
    fi
    dirty=$(git -C "$CHECKOUT" status --porcelain --untracked-files=no | wc -l)
    echo "  $CHECKOUT at $head: $(git -C "$CHECKOUT" log -1 --format=%s | cut -c1-100)"
    [ "$dirty" = 0 ] || echo "  note: $dirty changed files of the checkout are not committed: not copied"
    rc=0
    git -C "$CHECKOUT" archive --format=tar HEAD \
        | timeout $(t 300) "${SSH[@]}" "$PROJECT_CLEAR"' && mkdir -p /root/vdsp-sim /root/e2e/logs && tar -x -C /root/vdsp-sim' || rc=$?
    timeout 60 "${SSH[@]}" 'cat > /root/e2e/step && chmod +x /root/e2e/step' <<<"$GUEST_RUNNER" || rc=$?
    if [ "$rc" = 0 ]; then
        PROJECT_OK=1
        check PASS "project $head copied ($(timeout 60 "${SSH[@]}" 'du -sh /root/vdsp-sim | cut -f1') in the guest)"
    else
        check FAIL "copying the project into the guest: exit $rc"
    fi
fi

# --- 6. PyPI --------------------------------------------------------------------------------
step "network: the guest reaches PyPI over slirp, its TLS verified by the guest's trust store"
PYPI_PROBE='
import time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=20) as r:
            print("https://pypi.org/simple/pip/:", r.status, len(r.read()), "bytes"); break
    except OSError as exc:
        if time.monotonic() > deadline: raise SystemExit(f"PyPI unreachable: {exc}")
        time.sleep(2)
'
printf '  + python3 -c "urllib.request.urlopen(\x27https://pypi.org/simple/pip/\x27)"; cat /etc/pip.conf\n'
if [ "$DRY_RUN" = 0 ]; then
    rc=0; out=$(timeout 120 "${SSH[@]}" python3 - <<<"$PYPI_PROBE" 2>&1) || rc=$?
    echo "  $out"
    if [ "$rc" = 0 ]; then check PASS "PyPI reached: $out"; else check FAIL "PyPI: $out"; fi
fi

# --- 7... the README's commands in the guest --------------------------------------------------
for i in "${!G_NAMES[@]}"; do
    name=${G_NAMES[$i]} deadline=${G_DEADLINES[$i]}
    step "${G_TITLES[$i]}  [deadline ${deadline} s]"
    while IFS= read -r line; do printf '  + %s\n' "$line"; done <<<"${G_CMDS[$i]}"
    [ "$DRY_RUN" = 0 ] || continue
    if [ "$GUEST_UP" != 1 ]; then
        check FAIL "$name: not run (the guest is down)"
        continue
    fi
    if [ "$PROJECT_OK" != 1 ]; then
        check FAIL "$name: not run (the project is not in the guest)"
        continue
    fi
    T=$(date +%s%N) rc=0
    timeout -k 5 $((deadline + $(t 90))) "${SSH[@]}" "/root/e2e/step $name $deadline" <<<"${G_CMDS[$i]}" \
        > "$LOGDIR/$name.out" 2>&1 || rc=$?
    show "$LOGDIR/$name.out"
    case $rc in
        0) check PASS "$name ($(elapsed "$T") s)"
           # kept when made here, or when scripts/venv.sh had to install again on the cached layer
           if [ "$name" = setup ] && [ "$KEEP" = 1 ] && { [ "$SETUP_CACHED" = 0 ] || grep -q '^\[setup\] \(creating\|installing\)' "$LOGDIR/$name.out"; }; then
               save_setup_layer
           fi ;;
        124|137|255)
            check FAIL "$name: the guest did not answer (ssh exit $rc after $(elapsed "$T") s): killed"
            GUEST_UP=0; stop_qemu ;;
        *) if grep -q '^TIMEOUT: the step' "$LOGDIR/$name.out"; then
               check FAIL "$name: no end within its deadline of $deadline s"
           else
               check FAIL "$name: exit $rc after $(elapsed "$T") s"
           fi ;;
    esac
done

# --- logs back, power off -----------------------------------------------------------------------
step "logs: each step's output, the SoC's and pytest's logs, the journal and dmesg copied back; the guest powered off"
printf '  + ssh guest tar -c /root/e2e/logs ... | tar -x -C LOGDIR/guest\n'
if [ "$DRY_RUN" = 0 ]; then
    if [ "$GUEST_UP" = 1 ]; then
        mkdir -p "$LOGDIR/guest"
        rc=0
        timeout 180 "${SSH[@]}" 'journalctl -b --no-pager > /root/e2e/logs/journal.txt 2>&1; dmesg > /root/e2e/logs/dmesg.txt 2>&1;
            tar -c -C /root/e2e logs 2>/dev/null' | tar -x -C "$LOGDIR/guest" || rc=$?
        if [ "$rc" = 0 ]; then check PASS "guest logs copied to $LOGDIR/guest ($(du -sh "$LOGDIR/guest" | cut -f1))"
        else check FAIL "copying the guest's logs back: exit $rc"; fi
    else
        check FAIL "the guest's logs: the guest is down (the console log is in $LOGDIR/console.log)"
    fi
    stop_qemu
fi
step "cleanup (below): no QEMU, no mount, no overlay; the image removed unless cached (--keep)"
exit
}
