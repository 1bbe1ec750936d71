"""The stock firmware image a SoC boots, built from ``dsp_side/firmware_src/stock`` and signed with
this install's key: :func:`install_stock` puts it wherever a core's image is missing or would be
refused, or is a stock image of other sources. ``vdsp firmware install-stock`` calls it, and so
does the SoC's preparation job (:mod:`vdsp_sim.soc.prepare`) before the cores start."""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from protocol import errors
from protocol.constants import CORE_NAMES
from dsp_side import fw_image, signing
from vdsp_board.processes import rundir
from vdsp_board.identity import curve

log = logging.getLogger("vdsp.firmware")
STOCK_SRC = Path(__file__).resolve().parents[2] / "dsp_side" / "firmware_src" / "stock"


def install_stock(rt: Path, names: tuple[str, ...] = CORE_NAMES, *,
                  allow_unsigned: bool = False) -> list[tuple[Path, str]]:
    """Build the stock image, signed with this install's key (made and trusted if missing),
    into the default firmware directory for every core whose image there is missing or is
    one a core would refuse (unsigned unless ``allow_unsigned``, signed by an unknown key, a
    bad signature, corrupt): such an image is replaced, never kept, and the log says why. So is
    a stock image this install signed from other sources (an earlier vdsp-sim's: the header's
    ``sources`` is :func:`stock_sources` of the tree it was built from), so that an upgrade's
    operators and kernels are what the cores boot; an image of any other name is the user's.

    Returns (image written, why: "missing" or the refusal). Raises InvalidArgument when this
    install's key is not trusted (the rebuilt images would be refused too)."""
    keys = curve.keys_dir(rt)
    signing.keygen(keys)
    trust = signing.Trust.of(keys, allow_unsigned=allow_unsigned)
    key = signing.install_key(keys)
    if signing.public_raw(key) not in trust.keys:
        raise errors.InvalidArgument(
            f"this install's firmware signing key {signing.signing_key_path(keys)} is not trusted, so the cores "
            f"would refuse the stock images it signs: trust it again with 'vdsp firmware trust "
            f"{keys / signing.SIGNING_PUB} --name {signing.INSTALL_NAME}'")
    fwdir = rundir.firmware_dir(rt)
    digest = stock_sources()
    todo = []
    for name in names:
        why = _untrusted(fwdir / name, trust)
        if why is None:
            why = _outdated(fwdir / name, trust, digest)
            if why is not None:
                log.warning("replacing firmware image %s: %s", fwdir / name, why)
        elif why != "missing":
            log.warning("replacing firmware image %s, which a core would refuse: %s", fwdir / name, why)
        if why is not None:
            todo.append((fwdir / name, why))
    if todo:
        first = todo[0][0]
        try:
            fw_image.build(STOCK_SRC, first, name="stock", key=key, sources=digest)
            data = first.read_bytes()
            for path, _ in todo[1:]:
                fw_image.write_atomically(path, data)
        except OSError as exc:    # e.g. a directory where an image should be
            raise errors.InvalidArgument(f"cannot install the stock image in {fwdir}: {exc}") from exc
    return todo


def stock_sources() -> str:
    """sha256 over the stock source tree: each file's path in it and its bytes, in path order
    (``__pycache__`` aside), so that an image built from other sources is told apart."""
    h = hashlib.sha256()
    for path in sorted(p for p in STOCK_SRC.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(STOCK_SRC).as_posix().encode()
        data = path.read_bytes()
        h.update(len(rel).to_bytes(4, "little") + rel + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _outdated(path: Path, trust: signing.Trust, digest: str) -> str | None:
    """Why the trusted image at ``path`` is a stock image to build again, or None: one named
    "stock", signed by this install, whose sources are not today's stock tree."""
    header, _, signer = fw_image.read(path, trust)
    if header["name"] != "stock" or signer.name != signing.INSTALL_NAME or header.get("sources") == digest:
        return None
    return "a stock image built from other sources (an earlier vdsp-sim's), built again from this install's"


def _untrusted(path: Path, trust: signing.Trust) -> str | None:
    """Why a core would refuse the image at ``path`` ("missing" if there is none), or None."""
    try:
        fw_image.read(path, trust)
    except errors.FileNotFound:
        return "missing"
    except errors.VdspError as exc:
        return exc.message
    return None
