"""deploy/k8s/: one Deployment per board, the compose services as three containers of one
pod. Validated offline against the Kubernetes JSON schemas that kubernetes-validate bundles
(strict: unknown fields are errors), then checked against docker-compose.yml: the same
image, commands, keys and DDR; probes that round-trip a buffer; non-root. No cluster runs
them here: scripts/compose-e2e.sh plays board1.yaml with `podman kube play` (this file checks
that it does, offline)."""
from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from vdsp_board.processes import rundir

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BOARDS = ("board1", "board2")
CONTAINERS = ("vdsp0", "vdsp1", "relay")
K8S_VERSION = "1.30.0"


def manifest(board: str) -> dict:
    docs = [d for d in yaml.safe_load_all((K8S / f"{board}.yaml").read_text()) if d]
    assert len(docs) == 1, f"{board}.yaml: one Deployment per board"
    return docs[0]


def compose_services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def pod(board: str) -> dict:
    return manifest(board)["spec"]["template"]["spec"]


def containers(board: str) -> dict[str, dict]:
    return {c["name"]: c for c in pod(board)["containers"]}


def validation_errors(document: dict) -> list[str]:
    import kubernetes_validate
    try:
        kubernetes_validate.validate(document, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'/'.join(map(str, exc.path))}: {exc.message}"]
    return []


@pytest.mark.parametrize("board", BOARDS)
def test_manifest_is_a_valid_deployment(board):
    assert manifest(board)["kind"] == "Deployment"
    assert validation_errors(manifest(board)) == []


def test_the_validator_catches_mistakes():
    bad = copy.deepcopy(manifest("board1"))
    bad["spec"]["replicas"] = "one"
    assert validation_errors(bad)
    bad = copy.deepcopy(manifest("board1"))
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []    # a typo: strict mode refuses it
    assert validation_errors(bad)


def test_boards_differ_only_by_name():
    one, two = manifest("board1"), manifest("board2")
    assert one["metadata"]["name"] == "vdsp-board1" and two["metadata"]["name"] == "vdsp-board2"
    assert yaml.safe_dump(one).replace("board1", "board2") == yaml.safe_dump(two)


@pytest.mark.parametrize("board", BOARDS)
def test_one_pod_is_one_soc(board):
    spec = manifest(board)["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    assert spec["selector"]["matchLabels"] == spec["template"]["metadata"]["labels"]
    assert tuple(containers(board)) == CONTAINERS
    p = pod(board)
    # the pod's containers share its IPC and network namespaces: no host namespaces
    for key in ("hostIPC", "hostNetwork", "hostPID", "shareProcessNamespace"):
        assert not p.get(key), key


@pytest.mark.parametrize("board", BOARDS)
def test_same_image_and_commands_as_compose(board):
    svcs = compose_services()
    image = svcs["vdsp0"]["image"]
    for name, c in containers(board).items():
        assert c["image"] == image and c["imagePullPolicy"] == "Never", name
        assert c["command"] == ["/usr/bin/tini", "--"], f"{name}: tini reaps the firmware processes"
        compose_argv, argv = svcs[name]["command"], c["args"]
        # the same program and options; only endpoints differ (one network namespace: 127.0.0.1, own ports)
        def strip(a):
            return [re.sub(r"tcp://[^\s]+", "tcp://*", x) for x in a]
        assert strip(argv) == strip(compose_argv), name
    for c in pod(board)["initContainers"]:
        assert c["image"] == image


@pytest.mark.parametrize("board", BOARDS)
def test_endpoints_fit_one_network_namespace(board):
    cs = containers(board)
    binds = []
    for name in ("vdsp0", "vdsp1"):
        argv = cs[name]["args"]
        binds += [argv[argv.index("--bind") + 1], argv[argv.index("--fw-bind") + 1]]
    relay = cs["relay"]["args"]
    binds.append(relay[relay.index("--bind") + 1])
    assert all(b.startswith("tcp://127.0.0.1:") for b in binds), binds
    assert len({b.rpartition(":")[2] for b in binds}) == len(binds), f"two binds on one port: {binds}"
    cores = rundir.parse_core_list([relay[i + 1] for i, a in enumerate(relay) if a == "--core"])
    for name in ("vdsp0", "vdsp1"):
        argv = cs[name]["args"]
        assert cores[name] == argv[argv.index("--bind") + 1]


def env(c: dict) -> dict:
    return {e["name"]: e["value"] for e in c.get("env", [])}


@pytest.mark.parametrize("board", BOARDS)
def test_keys_and_ddr_are_shared_by_the_pod(board):
    svcs = compose_services()
    p = pod(board)
    volumes = {v["name"]: v for v in p["volumes"]}
    assert volumes["ddr"]["emptyDir"]["medium"] == "Memory", "the DDR is memory, as compose's tmpfs volume"
    init = " ".join(p["initContainers"][0]["command"])
    init_mounts = {m["name"]: m["mountPath"] for m in p["initContainers"][0]["volumeMounts"]}
    for name, c in containers(board).items():
        e = env(c)
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        # whole volumes (no subPath, which podman 4.3 ignores), mounted where the init container has them
        assert all("subPath" not in m for m in c["volumeMounts"]), name
        for var, volume in (("VDSP_SHM_DIR", "ddr"), ("VDSP_KEYS_DIR", "keys")):
            path = Path(e[var])
            # the directory one level below the world-writable emptyDir root, made 0700 by the
            # init container, with the name compose uses
            assert str(path.parent) == mounts[volume]["mountPath"] == init_mounts[volume], (name, var)
            assert path.name == Path(svcs[name]["environment"][var]).name, (name, var)
            assert re.search(rf"install -d -m 0700 [^&]*{re.escape(str(path))}\b", init), (name, var)
    assert "cp -a /keys/. /vol/keys/keys/" in init, "the image's keys, which trust the key that signed its firmware"
    assert "VDSP_KEYS_DIR=/vol/keys/keys vdsp keys init" in init


@pytest.mark.parametrize("board", BOARDS)
def test_probes_round_trip_a_buffer(board):
    cs = containers(board)
    for name in ("vdsp0", "vdsp1"):
        argv = cs[name]["args"]
        ctl = argv[argv.index("--bind") + 1]
        for probe in ("startupProbe", "livenessProbe"):
            cmd = cs[name][probe]["exec"]["command"]
            assert cmd == ["env", "VDSP_RPC_MODE=direct", f"VDSP_CORE_ENDPOINTS={name}={ctl}",
                           "vdsp", "health", "--core", name], (name, probe)
    relay = cs["relay"]["args"]
    cmd = cs["relay"]["readinessProbe"]["exec"]["command"]
    assert cmd == ["env", f"VDSP_RELAY_ENDPOINT={relay[relay.index('--bind') + 1]}", "vdsp", "health"]
    from tests.project.test_compose import health_deadline
    for name, probe in (("vdsp0", "startupProbe"), ("vdsp0", "livenessProbe"), ("vdsp1", "startupProbe"),
                        ("vdsp1", "livenessProbe"), ("relay", "readinessProbe")):
        # 'vdsp health' ends by itself, saying why, before the kubelet ends it
        assert cs[name][probe]["timeoutSeconds"] > health_deadline(), (name, probe)


@pytest.mark.parametrize("board", BOARDS)
def test_runs_as_the_images_user(board):
    from tests.project.test_compose import image_user
    _, uid = image_user()
    sc = pod(board)["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == uid and sc["runAsGroup"] == uid
    for c in [*pod(board)["initContainers"], *pod(board)["containers"]]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_e2e_plays_the_manifest_with_podman():
    """scripts/compose-e2e.sh plays board1.yaml with a real engine for Kubernetes YAML (podman
    kube play), changed only in its restart policy, runs the smoke sample in the pod and takes
    it down; the home-made docker emulation of a pod is gone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env["PATH"] = "/usr/bin:/bin"
    run = subprocess.run(["bash", str(ROOT / "scripts" / "compose-e2e.sh"), "--dry-run"], cwd="/", env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    pod_cmds = [ln[4:] for ln in run.stdout.splitlines() if ln.startswith("  $ ")]
    assert pod_cmds[0].startswith("sed 's/^    spec:$/&\\n      restartPolicy: OnFailure/' deploy/k8s/board1.yaml > ")
    played = pod_cmds[0].rsplit("> ", 1)[1]
    assert re.fullmatch(rf"podman --root \S+ --runroot \S+ --cgroup-manager cgroupfs kube play --network none "
                        rf"{re.escape(played)}", pod_cmds[1]), pod_cmds[1]
    assert pod_cmds[2].endswith(f"kube down {played}")
    text = (ROOT / "scripts" / "compose-e2e.sh").read_text()
    assert "vdsp sample smoke" in text[text.index("kube play"):text.index("kube down")]
    assert not (ROOT / "scripts" / "k8s-pod-docker.py").exists()


def test_the_played_copy_is_still_valid_and_differs_only_in_its_restart_policy():
    """What the e2e's sed makes of board1.yaml (its restartPolicy) and nothing else."""
    text = (K8S / "board1.yaml").read_text()
    played = re.sub(r"^    spec:$", "    spec:\n      restartPolicy: OnFailure", text, flags=re.M)
    doc = next(d for d in yaml.safe_load_all(played) if d)
    assert doc["spec"]["template"]["spec"].pop("restartPolicy") == "OnFailure"
    assert doc == manifest("board1")
