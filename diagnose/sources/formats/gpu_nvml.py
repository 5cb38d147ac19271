"""A file `diagnose gpu --live --save` wrote: a JSON header line (`"diagnose-nvml"`: boards,
limits, topology), then one JSON sample per GPU per interval. Read whole (sources/nvml_live.py
knows its shape)."""
from __future__ import annotations

from datetime import datetime

from ...evidence.model import Evidence, InputInfo
from ..readers.files import InputError
from .gpu_common import gpu_info


def sniff(head: bytes) -> bool:
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"diagnose-nvml"' in first


def load(text: str, src: str, ev: Evidence) -> InputInfo:
    from ..nvml_live import read
    info = InputInfo(path=src, kind="gpu-nvml", lines=text.count("\n") + (not text.endswith("\n")))
    try:
        data = read(text)
        for g in data["header"].get("gpus", []):
            gpu_info(ev, int(g["index"]), name=g.get("name"), power_limit_w=g.get("power_limit_w"),
                     sm_clock_max_mhz=g.get("sm_clock_max_mhz"), memory_total_mib=g.get("memory_total_mib"),
                     nvlink_active_links=g.get("nvlink_active_links"))
        for pair, cell in (data["header"].get("topology") or {}).items():
            a, b = pair.split("-")
            ev.topology.setdefault("links", {})[(f"GPU{a}", f"GPU{b}")] = cell
            ev.topology["links"][(f"GPU{b}", f"GPU{a}")] = cell
            ev.topology.setdefault("lines", {}).setdefault(f"GPU{a}", (src, 1, f"NVML topology GPU{a}-GPU{b}: {cell}"))
        if ev.topology.get("links"):
            ev.topology["gpus"] = sorted({a for a, _ in ev.topology["links"]}, key=lambda g: int(g[3:]))
        cycles: dict[int, int] = {}
        for j, s in enumerate(data["samples"], 2):
            gpu = int(s.get("gpu", 0))
            cycles[gpu] = cycles.get(gpu, 0) + 1
            try:
                when = datetime.fromisoformat(s["t"]) if s.get("t") else None
            except ValueError:
                when = None
            ev.gpu_rows.append({"time": when, "gpu": gpu, "cycle": cycles[gpu], "source": src, "line": j,
                                "util": s.get("util"), "mem_util": s.get("mem_util"), "power_w": s.get("power_w"),
                                "sm_clock_mhz": s.get("sm_clock_mhz"), "mem_clock_mhz": s.get("mem_clock_mhz"),
                                "temp_c": s.get("temp_c"), "mem_used_mib": s.get("mem_used_mib"),
                                "reasons": s.get("clock_reasons") or []})
    except ValueError as e:
        raise InputError(f"{src}: {e}") from None
    except (ArithmeticError, TypeError, AttributeError, KeyError) as e:
        # A file whose JSON has the wrong shapes (a GPU index of 5000 digits): damaged, one line.
        raise InputError(f"{src}: damaged nvml output ({type(e).__name__}: {str(e)[:80]})") from None
    ev.add_event("gpu_samples", src, 1, f"diagnose gpu --live: {len(data['samples'])} samples")
    info.recognised_lines = info.lines
    return info
