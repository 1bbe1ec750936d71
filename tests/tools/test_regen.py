"""Everything that names operators is derived from the contract entries by one command,
``python -m vdsp_sim.regen``: nothing derived is stale, the command rewrites what is (and
``--check`` reports it), the generated tables say what the entries declare, and prose states no
operator counts (they would go stale with the next operator)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from protocol.contract import cv_ops, framework_ops, nn_ops, pointcloud_ops
from vdsp_sim import regen

ROOT = Path(__file__).resolve().parents[2]


def test_nothing_derived_is_stale():
    stale = sorted(str(p.relative_to(ROOT)) for p in regen.changes())
    assert not stale, f"stale, derived from the operator entries: {', '.join(stale)}: run python -m vdsp_sim.regen"


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of every derived file of this checkout (what regen reads and writes)."""
    for path in regen.derived():
        dest = tmp_path / path.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return tmp_path


def test_the_command_rewrites_what_is_stale_and_check_names_it(tree, capsys):
    ids, readme = tree / "protocol" / "contract" / "cv_ids.py", tree / "README.md"
    ids.write_text(ids.read_text().replace("GAUSSIAN_BLUR = 0x0809", "GAUSSIAN_BLUR = 0x0999"))
    readme.write_text(readme.read_text().replace("| CV ([docs/cv.md](docs/cv.md)) | 0x0800–", "| CV | 0x0800–"))
    before = readme.read_text()
    assert regen.main(["--check"], root=tree) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [f"stale: {p} (run python -m vdsp_sim.regen)" for p in
                                ("protocol/contract/cv_ids.py", "README.md")], out
    assert readme.read_text() == before                     # --check writes nothing
    assert regen.main([], root=tree) == 0
    assert capsys.readouterr().out.splitlines() == ["wrote protocol/contract/cv_ids.py", "wrote README.md"]
    assert "GAUSSIAN_BLUR = 0x0809\n" in ids.read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text()
    assert regen.main(["--check"], root=tree) == 0 and capsys.readouterr().out == ""


def test_a_document_without_its_markers_is_an_error_and_nothing_is_written(tree, capsys):
    ids, doc = tree / "protocol" / "contract" / "cv_ids.py", tree / "docs" / "cv.md"
    ids.write_text("stale\n")
    doc.write_text(doc.read_text().replace("<!-- end of generated cv operators -->\n", ""))
    assert regen.main([], root=tree) == 2
    err = capsys.readouterr().err
    assert "docs/cv.md: no region 'cv operators'" in err and "<!-- end of generated cv operators -->" in err, err
    assert ids.read_text() == "stale\n"


def test_outside_a_source_checkout_it_says_so(tmp_path, capsys):
    assert regen.main([], root=tmp_path) == 2
    assert "is not a source checkout" in capsys.readouterr().err


def _region(path: Path, name: str) -> str:
    text = path.read_text()
    return text[text.index(f"regen: {name} -->"):text.index(f"<!-- end of generated {name} -->")]


def test_the_generated_tables_say_what_the_entries_declare():
    cv = _region(ROOT / "docs" / "cv.md", "cv operators")
    assert ("| 0x0809 | gaussianBlur | `gaussian_blur` | 8-bit → same | Gaussian smoothing (cv::GaussianBlur); ksize "
            "odd, sigma 0 = derived from ksize. | `ksize` 2 values 1..255 odd (5, 5), `sigma_x` 0..1000 (0), `sigma_y` "
            "0..1000 (0), `border` reflect101/constant/replicate/reflect (reflect101) |") in cv
    assert "| 0x0818 | remap | `remap(soc, src, map_x, map_y, dst)` |" in cv
    assert "`type` binary/binary_inv/trunc/tozero/tozero_inv (binary), `method` fixed/otsu/triangle (fixed); " \
           "returns `threshold` |" in cv
    assert "| `kernel` list (required), `anchor` 2 values ≥ -1 (-1, -1), `delta` (0)," in cv   # filter2D: ksize derived
    assert len(re.findall(r"^\| 0x08[0-9a-f]{2} \|", cv, re.M)) == len(cv_ops.ENTRIES)
    images = _region(ROOT / "PROTOCOL.md", "cv images")
    assert "| `0x0818` | `cv.remap` | `src`, `map_x`, `map_y` | `dst` |" in images
    catalogs = _region(ROOT / "README.md", "catalogs")
    for title, mod in (("framework (in every image)", framework_ops), ("CV ([docs/cv.md](docs/cv.md))", cv_ops),
                       ("NN ([docs/nn.md](docs/nn.md))", nn_ops),
                       ("point clouds ([docs/pointcloud.md](docs/pointcloud.md))", pointcloud_ops)):
        ids = sorted(mod.ENTRIES)
        assert f"| {title} | 0x{ids[0]:04x}–0x{ids[-1]:04x} | {len(ids)} | `{mod.ENTRIES[ids[0]].name}`, " in catalogs
    assert "| framework (in every image) | 0x0000–0x0005 | 6 | `ping`, `memcpy`, `fill`, `checksum`, `sleep`, " \
           "`count` |" in catalogs


# Where prose could state how many operators there are: the docs, the demo, and the docstrings
# and comments of the code that registers, wraps or documents operators.
PROSE = ["README.md", "PROTOCOL.md", "demo.sh", "docs/*.md", "protocol/contract/*.py", "dsp_side/operators/**/*.py",
         "arm_side/cv/*.py", "arm_side/stubs/__init__.py", "vdsp_sim/samples/cv.py", "vdsp_sim/benchmarks/bench_cv.py"]


def _outside_regions(text: str) -> str:
    return re.sub(r"<!-- generated by .*?<!-- end of generated [^>]*-->", "", text, flags=re.S)


def test_prose_states_no_operator_counts():
    counts = {len(mod.ENTRIES) for mod in (cv_ops, nn_ops, pointcloud_ops, framework_ops)}
    pattern = re.compile(r"\b(?:all |the )?(\d+) (?:stock |CV |NN |typed )?(?:operators|functions)\b")
    found = []
    for glob in PROSE:
        for path in sorted(ROOT.glob(glob)):
            for m in pattern.finditer(_outside_regions(path.read_text())):
                if int(m.group(1)) in counts:
                    found.append(f"{path.relative_to(ROOT)}: {m.group(0)!r}")
    assert not found, "operator counts in prose go stale with the next operator; say it without the number, or " \
                      f"let python -m vdsp_sim.regen write it (a generated table): {found}"
