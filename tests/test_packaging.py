"""The wheel carries the presets and the errata's claims as package data, so a non-editable
install works.

Builds the wheel once (no build isolation: the venv's own setuptools, no network) and reads its
file list; every preset file in the tree must be inside it at the same package path.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools")
    out = tmp_path_factory.mktemp("wheel")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(out),
        str(ROOT),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("kvcalc-*.whl")
    with zipfile.ZipFile(path) as z:
        yield z


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    return set(wheel.namelist())


@pytest.mark.parametrize("kind", ["models", "hardware"])
def test_every_preset_file_is_in_the_wheel(wheel_names, kind):
    files = sorted(p.name for p in (ROOT / "presets" / kind).glob("*.toml"))
    assert files, f"no presets/{kind}/*.toml in the tree"
    missing = [f for f in files if f"presets/{kind}/{f}" not in wheel_names]
    assert not missing


def test_wheel_has_the_packages_and_the_console_script(wheel, wheel_names):
    # every module of the tree: a subpackage missing from the build config would be left out
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "calc").rglob("*.py"))
    assert {"calc/hf/__init__.py", "calc/serving/plan.py", "calc/cli/main.py"} <= set(modules)
    missing = [m for m in modules if m not in wheel_names]
    assert not missing
    entry_points = next(n for n in wheel_names if n.endswith(".dist-info/entry_points.txt"))
    text = wheel.read(entry_points).decode()
    assert "[console_scripts]" in text and "kvcalc = calc.cli:main" in text


def test_the_errata_claims_are_in_the_wheel(wheel, wheel_names):
    assert "calc/data/errata_claims.toml" in wheel_names
    shipped = wheel.read("calc/data/errata_claims.toml")
    assert shipped == (ROOT / "calc" / "data" / "errata_claims.toml").read_bytes()
