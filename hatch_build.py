"""Builds the bulk scanner's C core when the wheel is built (`pip install .`, `pip install -e .`).

Optional: where no C compiler works, the wheel is built without it (pure Python, a warning says
why) and big logs are read by the Python reader, several times slower. `DIAGNOSE_BUILD_NATIVE=0`
skips it.
Why a hatchling hook rather than setuptools' Extension: one build backend for the whole package
(rules are mapped into it by hatchling), and the library is plain C loaded with ctypes, not a
CPython extension module, so it needs a compiler and nothing of Python's headers.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

IN_WHEEL = "diagnose/sources/readers/native/libscan.so"


def _build_module(root: str):
    # By path: diagnose's own dependencies are not installed while it is being built.
    spec = importlib.util.spec_from_file_location("_diagnose_native_build", Path(root, "diagnose/sources/readers/native/build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class NativeScannerHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        self._tmp = None
        if self.target_name != "wheel":
            return
        if os.environ.get("DIAGNOSE_BUILD_NATIVE", "1").strip().lower() in ("0", "no", "off", "false"):
            self.app.display_info("diagnose: C scanner not built (DIAGNOSE_BUILD_NATIVE=0): big logs are read by the Python reader")
            return
        native = _build_module(self.root)
        if version == "editable":
            out = native.LIBRARY                  # in the checkout, where the editable install imports from
        else:
            self._tmp = tempfile.mkdtemp(prefix="diagnose-native-")
            out = Path(self._tmp, "libscan.so")
        try:
            native.build(out)
        except native.BuildError as e:
            self.app.display_warning(f"diagnose: C scanner not built: {e}. diagnose works without it; "
                                     f"big logs are read by the Python reader, several times slower")
            return
        if version != "editable":
            build_data["force_include"][str(out)] = IN_WHEEL
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
