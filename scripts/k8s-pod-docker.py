#!/usr/bin/env python3
"""Run the pod of a Deployment manifest with docker, roughly as a kubelet would, where no
Kubernetes cluster is at hand: for scripts/compose-e2e.sh, which runs deploy/k8s/board1.yaml.

  k8s-pod-docker.py up MANIFEST --name NAME     pause container, init containers, containers, probes
  k8s-pod-docker.py restart NAME CONTAINER      restart one container, wait for its probes again
  k8s-pod-docker.py down NAME                   remove the containers and the volumes' directories

What it does like a kubelet: one network and IPC namespace for the pod (a "pause" container
with only a loopback interface; every container joins it), emptyDir volumes (directories
under /dev/shm, a tmpfs, mode 0777 like an emptyDir) with subPath mounts, init containers
run to completion in order, containers with their command, args, env, user (runAsUser,
runAsGroup), dropped capabilities and no-new-privileges, restarted always, and the exec
startup/liveness/readiness probes, polled until they pass. What it does not: scheduling,
resource limits, Services, image pulls (imagePullPolicy must be Never), other volume kinds.
Prints what it runs; exit status 0 only if every probe passed.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

STATE = Path("/dev/shm")


def docker(*args: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    if not quiet:
        print("  docker " + " ".join(args[:12]) + (" ..." if len(args) > 12 else ""), flush=True)
    return subprocess.run(["docker", *args], check=check, capture_output=True, text=True)


def volume_dir(name: str, volume: str) -> Path:
    return STATE / f"k8s-pod-{name}" / volume


def run_args(name: str, pod: dict, c: dict) -> list[str]:
    ctx = {**(pod.get("securityContext") or {}), **(c.get("securityContext") or {})}
    args = ["--network", f"container:{name}-pause", "--ipc", f"container:{name}-pause"]
    if "runAsUser" in ctx:
        args += ["--user", f"{ctx['runAsUser']}:{ctx.get('runAsGroup', ctx['runAsUser'])}"]
    if ctx.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    for cap in (ctx.get("capabilities") or {}).get("drop", []):
        args += ["--cap-drop", cap]
    for e in c.get("env", []):
        args += ["-e", f"{e['name']}={e['value']}"]
    for m in c.get("volumeMounts", []):
        host = volume_dir(name, m["name"]) / m.get("subPath", "")
        args += ["-v", f"{host}:{m['mountPath']}{':ro' if m.get('readOnly') else ''}"]
    if c.get("imagePullPolicy") != "Never":
        raise SystemExit(f"{c['name']}: imagePullPolicy must be Never (no registry here)")
    if c.get("command"):
        args += ["--entrypoint", c["command"][0], c["image"], *c["command"][1:]]
    else:
        args.append(c["image"])
    return args + list(c.get("args", []))


def probe(name: str, c: dict, kind: str, deadline: float) -> bool:
    p = c.get(kind)
    if not p:
        return True
    period = p.get("periodSeconds", 10)
    while True:
        r = docker("exec", f"{name}-{c['name']}", *p["exec"]["command"], check=False, quiet=True)
        if r.returncode == 0:
            print(f"  {c['name']} {kind}: passed: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else 'exit 0'}")
            return True
        if time.monotonic() > deadline:
            print(f"  {c['name']} {kind}: FAILED (exit {r.returncode}): {(r.stdout + r.stderr).strip()[-400:]}")
            return False
        time.sleep(min(period, 2))


def probes(name: str, pod: dict, only: str | None = None, timeout: float = 180) -> bool:
    deadline = time.monotonic() + timeout
    ok = True
    for c in pod["containers"]:
        if only in (None, c["name"]):
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                ok &= probe(name, c, kind, deadline)
    return ok


def load(manifest: Path) -> dict:
    (doc,) = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    assert doc["kind"] == "Deployment", doc["kind"]
    return doc["spec"]["template"]["spec"]


def up(manifest: Path, name: str) -> int:
    pod = load(manifest)
    image = pod["containers"][0]["image"]
    for v in pod.get("volumes", []):
        if "emptyDir" not in v:
            raise SystemExit(f"volume {v['name']}: only emptyDir is emulated")
        d = volume_dir(name, v["name"])
        d.mkdir(parents=True)
        d.chmod(0o777)
    docker("run", "-d", "--name", f"{name}-pause", "--network", "none", "--ipc", "shareable",
           "--entrypoint", "/usr/bin/tini", image, "--", "sleep", "infinity")
    for c in pod.get("initContainers", []):
        r = docker("run", "--rm", "--name", f"{name}-{c['name']}", *run_args(name, pod, c), check=False)
        if r.returncode != 0:
            print(f"  init container {c['name']} exit {r.returncode}: {(r.stdout + r.stderr)[-800:]}")
            return 1
        print(f"  init container {c['name']}: done")
    for c in pod["containers"]:
        docker("run", "-d", "--restart", "always", "--name", f"{name}-{c['name']}", *run_args(name, pod, c))
    return 0 if probes(name, pod) else 1


def restart(manifest: Path, name: str, container: str) -> int:
    docker("restart", f"{name}-{container}")
    return 0 if probes(name, load(manifest)) else 1


def down(name: str) -> int:
    ids = docker("ps", "-aq", "--filter", f"name=^{name}-", quiet=True).stdout.split()
    if ids:
        docker("rm", "-f", *ids)
    shutil.rmtree(STATE / f"k8s-pod-{name}", ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/k8s-pod-docker.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("manifest", type=Path)
    u.add_argument("--name", required=True)
    r = sub.add_parser("restart")
    r.add_argument("manifest", type=Path)
    r.add_argument("name")
    r.add_argument("container")
    d = sub.add_parser("down")
    d.add_argument("name")
    args = ap.parse_args(argv)
    if args.cmd == "up":
        return up(args.manifest, args.name)
    if args.cmd == "restart":
        return restart(args.manifest, args.name, args.container)
    return down(args.name)


if __name__ == "__main__":
    sys.exit(main())
