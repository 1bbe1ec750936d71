"""deploy/k8s/: one Deployment per board, the compose services as three containers of one
pod. Validated offline against the Kubernetes JSON schemas that kubernetes-validate bundles
(strict: unknown fields are errors), then checked against docker-compose.yml: the same
image, commands, keys and DDR; probes that round-trip a buffer; non-root. No cluster runs
them here (tests/test_compose.py and scripts/compose-e2e.sh run the compose services)."""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from vdsp_sim.board import runtime

ROOT = Path(__file__).resolve().parent.parent
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
    cores = runtime.parse_core_list([relay[i + 1] for i, a in enumerate(relay) if a == "--core"])
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
    for name, c in containers(board).items():
        e = env(c)
        assert e["VDSP_SHM_DIR"] == svcs[name]["environment"]["VDSP_SHM_DIR"], name
        assert e["VDSP_KEYS_DIR"] == svcs[name]["environment"]["VDSP_KEYS_DIR"], name
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert mounts[e["VDSP_SHM_DIR"]]["name"] == "ddr" and mounts[e["VDSP_KEYS_DIR"]]["name"] == "keys", name
        # one level below the world-writable emptyDir root, in directories the init container made 0700
        init = " ".join(p["initContainers"][0]["command"])
        for m in (mounts[e["VDSP_SHM_DIR"]], mounts[e["VDSP_KEYS_DIR"]]):
            assert m.get("subPath"), name
            assert re.search(rf"install -d -m 0700 .*/{m['subPath']}\b", init), m
    init = " ".join(p["initContainers"][0]["command"])
    assert "cp -a /keys/." in init, "the image's keys, which trust the key that signed its firmware"
    assert "vdsp keys init" in init


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


@pytest.mark.parametrize("board", BOARDS)
def test_runs_as_the_images_user(board):
    from tests.test_compose import image_user
    _, uid = image_user()
    sc = pod(board)["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == uid and sc["runAsGroup"] == uid
    for c in [*pod(board)["initContainers"], *pod(board)["containers"]]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_pod_runner_understands_the_manifest():
    """scripts/k8s-pod-docker.py (which scripts/compose-e2e.sh uses to run board1's pod with
    docker) turns each container into docker run options without a docker engine."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("k8s_pod_docker", ROOT / "scripts" / "k8s-pod-docker.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    p = runner.load(K8S / "board1.yaml")
    args = runner.run_args("pod", p, containers("board1")["vdsp1"])
    joined = " ".join(args)
    assert "--network container:pod-pause --ipc container:pod-pause" in joined
    assert "--user 10001:10001" in joined and "--cap-drop ALL" in joined
    assert f"-v {runner.volume_dir('pod', 'ddr')}/ddr:/ddr" in joined
    assert args[-len(containers("board1")["vdsp1"]["args"]):] == containers("board1")["vdsp1"]["args"]
    assert args[args.index("--entrypoint") + 1] == "/usr/bin/tini"
