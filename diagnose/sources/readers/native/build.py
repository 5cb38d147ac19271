"""Compiles scan.c into the shared library the bulk scanner loads (LIBRARY, beside this file).

Run when the package is built, never when diagnose runs: hatch_build.py calls `build()` for
`pip install .` (into the wheel) and `pip install -e .` (in place, in the checkout). Where no C
compiler works, the package is installed without it and big logs are read by the Python reader.
`python -m diagnose.sources.readers.native --build` builds it again in place, after scan.c was edited.

Standard library only: the build hook loads this file by path, before diagnose's dependencies
are installed.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path

SOURCE = Path(__file__).with_name("scan.c")
LIBRARY = Path(__file__).with_name("libscan.so")


class BuildError(Exception):
    """No C compiler, or it failed (or took too long): one line that says which."""


def source_key(text: bytes) -> str:
    """What the library records of the scan.c it came from (zlib: hashlib loads OpenSSL, 4 ms of
    every run that checks it)."""
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"


def compiler() -> list[str]:
    import shlex
    import sysconfig
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def build(out: Path = LIBRARY) -> Path:
    """Compile SOURCE into `out`. Built beside it and renamed: a concurrent build (two Pythons
    installing from one checkout) leaves a whole file either way."""
    # Imported here: every run that reads a log loads this module for SOURCE and source_key, and
    # tempfile alone costs it ~8 ms.
    import subprocess
    import tempfile
    out = Path(out)
    text = SOURCE.read_bytes()
    cc = compiler()
    fd, tmp = tempfile.mkstemp(prefix=".scan-", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        # -O3: the prompt-head checksum is only vectorised there (a third faster in all). No
        # -march: AVX2 and carry-less multiplication are chosen at run time, so a wheel built on
        # one machine runs on another.
        subprocess.run([*cc, "-O3", "-shared", "-fPIC", f'-DDG_SOURCE_KEY="{source_key(text)}"', "-o", tmp, str(SOURCE)],
                       check=True, capture_output=True, timeout=300)
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    except FileNotFoundError as e:
        raise BuildError(f"no C compiler ({e.filename or cc[0]})") from None
    except subprocess.CalledProcessError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise BuildError(f"the C compiler ({cc[0]}) failed: " + (err[0] if err else f"exit {e.returncode}")) from None
    except (subprocess.SubprocessError, OSError) as e:
        raise BuildError(f"cannot build the C scanner ({e})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out

