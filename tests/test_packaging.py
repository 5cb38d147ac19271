"""A non-editable install must carry the rules and the C scanner's source: build the wheel and look inside."""
from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import ROOT
from diagnose.engine.rules import load_rules


def test_wheel_ships_every_rule_file_and_the_console_script(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    wheel = next(tmp_path.glob("diagnose-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for r in load_rules():
        rel = r.path.relative_to(ROOT / "rules").as_posix()
        assert f"diagnose/_rules/{rel}" in names, rel
    # the C scanner is built on the user's machine from its source: the source must ship
    assert "diagnose/sources/native/scan.c" in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "diagnose = diagnose.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
