"""A non-editable install must carry the rules and the C scanner, compiled when the wheel is built:
build the wheel and look inside, install it and run its console script. Where no C compiler works,
the wheel is pure Python and the installed diagnose reads big logs with its Python reader, saying so once.
The sdist must carry what its own tests need, and install with pip as the wheel does. The
distribution is `diagnose-llm-serving` (`diagnose` on PyPI is another project); the command and
the import package are `diagnose`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import diagnose
from conftest import ROOT, on_a_terminal, one, REPORT_SCHEMA
from diagnose._compat import tomllib
from diagnose.ruleset.rules import load_rules

DIST = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
FILE_STEM = DIST.replace("-", "_")          # how wheel and sdist file names spell it (PEP 427, 625)


def _wheel(out: Path, **env) -> tuple[Path, str]:
    """`pip wheel` of this checkout, as `pip install .` builds it: the wheel, and what the build said."""
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(ROOT)],
                       capture_output=True, timeout=300, env=dict(os.environ, **env))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return next(out.glob(f"{FILE_STEM}-*.whl")), p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")


def _install(wheel: Path, d: Path) -> Path:
    """`wheel` installed into a fresh virtual environment (its dependencies come from the
    environment running the tests, so no network is needed): its bin folder."""
    venv.create(d / "venv", with_pip=False)
    py = d / "venv" / "bin" / "python"
    # The dependencies: this environment's site-packages, after the new one's own (so the wheel's
    # diagnose, installed there, is the one imported). A .pth line adds a path without running the
    # .pth files found there (an editable install of the checkout stays out).
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "outer-dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--ignore-installed", "-q", str(wheel)],
                       capture_output=True, timeout=300)
    if p.returncode != 0 and b"no such option: --python" in p.stderr:      # pip < 22.3
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--ignore-installed", "-q", "--prefix", str(d / "venv"),
                            str(wheel)], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return d / "venv" / "bin"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return _wheel(tmp_path_factory.mktemp("wheel"))[0]


def test_the_distribution_is_not_named_like_the_unrelated_pypi_diagnose():
    assert DIST == "diagnose-llm-serving"


def test_wheel_ships_every_rule_file_the_c_scanner_and_the_console_script(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"\nName: {DIST}\n" in meta
    for r in load_rules():
        rel = r.path.relative_to(ROOT / "rules").as_posix()
        assert f"diagnose/_rules/{rel}" in names, rel
    # the C scanner is compiled when the wheel is built, and the wheel says it is for this platform
    assert "diagnose/sources/readers/native/libscan.so" in names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in meta and "-none-any" not in wheel.name, meta
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "diagnose = diagnose.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


# -- the product as a user installs it ---------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    return _install(wheel, tmp_path_factory.mktemp("installed"))


def _run_installed(bin_dir: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    # No PYTHONPATH, run from outside the checkout: only the installed package can answer.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", COLUMNS="120")
    return subprocess.run([str(bin_dir / "diagnose"), *map(str, args)], capture_output=True, cwd=cwd, env=env,
                          timeout=120)


def test_installed_console_script_diagnoses_the_readme_example(installed, tmp_path):
    where = subprocess.run([str(installed / "python"), "-c", "import diagnose; print(diagnose.__file__)"],
                           capture_output=True, cwd=tmp_path, env={k: v for k, v in os.environ.items()
                                                                   if k != "PYTHONPATH"})
    assert str(installed.parent) in where.stdout.decode(), "the test must exercise the wheel, not the checkout"
    p = _run_installed(installed, "--format", "json", ROOT / "fixtures" / "seed003" / "realtime.log", cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    d = one(p.stdout)
    by = {f["id"]: f for f in d["findings"]}
    assert by["tp-for-small-model"]["fix"]["flags"]["set"] == {"--tensor-parallel-size": "1", "--data-parallel-size": "4"}
    assert by["cuda-graphs-disabled"]["fix"]["flags"]["remove"] == ["--enforce-eager"]
    # the rule files travel inside the package
    r = _run_installed(installed, "rules", cwd=tmp_path)
    assert r.returncode == 0 and "tp-for-small-model" in r.stdout.decode()
    v = _run_installed(installed, "--version", cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.decode() == f"diagnose {_installed_version(installed, tmp_path)}\n"
    # the JSON report's schema travels inside the package too
    s = _run_installed(installed, "schema", cwd=tmp_path)
    assert s.returncode == 0 and json.loads(s.stdout) == REPORT_SCHEMA


def _installed_version(bin_dir: Path, cwd: Path) -> str:
    """The version pip recorded for the distribution in that environment (its metadata, by name)."""
    p = subprocess.run([str(bin_dir / "python"), "-c", f"import importlib.metadata as m; print(m.version({DIST!r}))"],
                       capture_output=True, text=True, cwd=cwd, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# pipx and uv, as the README gives them: test dependencies (pyproject's `test` extra), found beside
# this Python. They fetch the wheel's dependencies from the package index, as bootstrap does.
TOOLS = {"pipx": lambda exe, whl: [exe, "install", "--python", sys.executable, str(whl)],
         "uv": lambda exe, whl: [exe, "tool", "install", "--python", sys.executable, str(whl)]}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_pipx_and_uv_install_the_built_wheel(tool, wheel, tmp_path):
    exe = shutil.which(tool, path=str(Path(sys.executable).parent)) or shutil.which(tool)
    assert exe is not None, f"{tool} is not installed: `sh scripts/bootstrap --test` installs it (pyproject's test extra)"
    bin_dir = tmp_path / "bin"                # the tool's own folders, so nothing outside is touched
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"),
               UV_TOOL_DIR=str(tmp_path / "uv"), UV_TOOL_BIN_DIR=str(bin_dir))
    p = subprocess.run(TOOLS[tool](exe, wheel), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    r = _run_installed(bin_dir, "-q", "--fail-on", "high", ROOT / "fixtures" / "seed003" / "realtime.log", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == b"", r.stderr.decode()      # tp-for-small-model is HIGH
    assert _run_installed(bin_dir, "-V", cwd=tmp_path).stdout.decode() == f"diagnose {diagnose.__version__}\n"


def test_installed_console_script_reports_bad_input_in_one_line(installed, tmp_path):
    p = _run_installed(installed, tmp_path / "no-such.log", cwd=tmp_path)
    assert p.returncode == 2
    err = p.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "no-such.log" in err[0] and "Traceback" not in p.stderr.decode()


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    """`python -m build --sdist` of this checkout."""
    out = tmp_path_factory.mktemp("sdist")
    p = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)],
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return next(out.glob(f"{FILE_STEM}-*.tar.gz"))


def test_sdist_installs_with_pip_and_its_command_runs(sdist, tmp_path):
    """`pip install diagnose_llm_serving-….tar.gz` builds the wheel from the sdist (the C scanner
    too) and gives the same `diagnose` command."""
    bin_dir = _install(sdist, tmp_path)
    p = _run_installed(bin_dir, "--format", "json", ROOT / "fixtures" / "seed003" / "realtime.log", cwd=tmp_path)
    assert p.returncode == 0, p.stderr.decode()
    assert "tp-for-small-model" in {f["id"] for f in one(p.stdout)["findings"]}
    v = _run_installed(bin_dir, "-V", cwd=tmp_path)
    assert v.stdout.decode() == f"diagnose {_installed_version(bin_dir, tmp_path)}\n"
    native = subprocess.run([str(bin_dir / "python"), "-m", "diagnose.sources.readers.native"], capture_output=True,
                            text=True, cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert native.stdout.startswith("C scanner: "), native.stdout


def test_sdist_holds_what_its_tests_need_and_they_pass(sdist, tmp_path):
    """The sdist, unpacked: the suite's imports resolve there (bench/, fixtures/, tests/), and a
    sample of the tests passes from the unpacked tree."""
    with tarfile.open(sdist) as tf:
        tf.extractall(tmp_path / "src", filter="data") if hasattr(tarfile, "data_filter") else tf.extractall(tmp_path / "src")
    top = next((tmp_path / "src").iterdir())
    for need in ("LICENSE", "README.md", "pyproject.toml", "bench/score_corpus.py", "bench/hostile_lines.py",
                 "tests/conftest.py", "fixtures/samples/vllm/MANIFEST.md", "fixtures/real/corpus.toml",
                 "rules", "diagnose/sources/readers/native/scan.c", "scripts/bootstrap"):
        assert (top / need).exists(), f"the sdist lacks {need}"
    env = dict(os.environ, PYTHONPATH=str(top))
    # A sample of the suite: the rule files (the catalogue's completeness check, 15 s, runs in the
    # main suite) and the seed scenarios end to end.
    q = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_rule_files.py",
                        "tests/test_seeds.py", "-k", "not catalogued"], capture_output=True, cwd=top, env=env,
                       timeout=600)
    assert q.returncode == 0, q.stdout.decode()[-3000:]


# -- installed where no C compiler works ------------------------------------------------------------
@pytest.fixture(scope="module")
def without_compiler(tmp_path_factory):
    """The wheel `pip install .` builds where the C compiler fails (CC=false), installed: (its bin
    folder, the wheel, what the build said)."""
    d = tmp_path_factory.mktemp("nocc")
    wheel, said = _wheel(d / "dist", CC="false")
    return _install(wheel, d), wheel, said


def _big_edges_log(tmp_path: Path) -> Path:
    from test_native_scanner import EDGE_LINES, _file
    return _file(tmp_path, EDGE_LINES, "edges.log")


def test_without_a_compiler_the_wheel_is_pure_python_and_the_build_says_why(without_compiler):
    bin_dir, wheel, said = without_compiler
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert "C scanner not built: the C compiler (false) failed" in said, said[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(bin_dir / "python"), "-m", "diagnose.sources.readers.native"], capture_output=True, cwd=bin_dir,
                       env=env, timeout=120)
    assert p.stdout.decode().startswith("C scanner not in use: not built when diagnose was installed"), p.stdout


def test_without_a_compiler_big_logs_read_the_same_and_it_is_said_once(without_compiler, tmp_path):
    """Big logs take the Python reader: the same report as the line-by-line path; a terminal is told
    once per run (two big inputs), a pipe stays clean for small inputs."""
    bin_dir = without_compiler[0]
    log = _big_edges_log(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [str(bin_dir / "diagnose"), "--format", "json"]
    fast = subprocess.run([*cmd, str(log)], capture_output=True, env=dict(env, DIAGNOSE_BULK_MIN_BYTES="0"), timeout=120)
    ref = subprocess.run([*cmd, str(log)], capture_output=True, env=dict(env, DIAGNOSE_BULK_MIN_BYTES=str(10**15)), timeout=120)
    assert fast.returncode == ref.returncode == 0, fast.stderr.decode()
    a, b = one(fast.stdout), one(ref.stdout)
    assert a["inputs"][0]["lines"] == b["inputs"][0]["lines"] > 1000
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in b["findings"]]
    seed = ROOT / "fixtures" / "seed003" / "realtime.log"
    small = dict(env, DIAGNOSE_BULK_MIN_BYTES="0")   # big inputs below the default: told on a terminal only
    rc, term = on_a_terminal([*cmd, seed, seed], small, cwd=tmp_path)
    notes = [ln for ln in term.splitlines() if "note:" in ln]
    assert rc in (0, 1) and len(notes) == 1, term
    assert "Python reader" in notes[0] and "not built when diagnose was installed" in notes[0] and "DIAGNOSE_NATIVE=0" in notes[0]
    piped = subprocess.run([*cmd, seed, seed], capture_output=True, env=small, cwd=tmp_path, timeout=120)
    assert piped.returncode in (0, 1) and piped.stderr == b"", piped.stderr.decode()
