"""`nvidia-smi topo -m`: a header naming the devices (`GPU0 GPU1 … NIC0 CPU Affinity NUMA
Affinity`), a row per device with the link to every other (`NV18`, `PIX`, `SYS`, …), then the
legend. The links between tensor-parallel ranks decide whether an all-reduce crosses PCIe."""
from __future__ import annotations

import re

from .base import FormatReader, LineFormat
from ...lazyre import lazy

ROW = lazy(r"^\s*(?P<name>GPU\d+|NIC\d+|mlx\d+_\d+)\s")
CELL = lazy(r"NV\d+|SYS|NODE|PHB|PXB|PIX|X")
HEADER = lazy(r"^\s*GPU0\s+(?:GPU\d|NIC\d|mlx|CPU)")
LEGEND = lazy(r"^\s*(Legend|NIC Legend|X\s+=|SYS\s+=|NODE\s+=|PHB\s+=|PXB\s+=|PIX\s+=|NV#\s+=|NIC\d+: )")
CPU_LIST = lazy(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")


class Topo(LineFormat):
    kind = "gpu-topo"
    keywords = ("GPU0",)

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = Topo.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.header: list[str] = []
        self.ev = None
        self.first = 0

    def open(self, n, text, ev, before=False):
        if not HEADER.match(text):
            return False
        self.ev, self.first = ev, n
        self.header = re.findall(r"GPU\d+|NIC\d+|mlx\d+_\d+", text)
        return True

    def more(self, n, text):
        s = text.strip()
        if not s:
            return True             # the blank line before the legend
        if LEGEND.match(s):
            return True
        m = ROW.match(text)
        if not m:
            return False
        name = m.group("name")
        cells = CELL.findall(text[m.end():])[: len(self.header)]
        if len(cells) < len(self.header):
            return False
        topo = self.ev.topology
        for other, cell in zip(self.header, cells):
            if other != name:
                topo.setdefault("links", {})[(name, other)] = cell
        topo.setdefault("lines", {})[name] = (self.src, n, text.rstrip())
        if name.startswith("GPU"):
            # after the cells: CPU affinity (`0-31,64-95`), NUMA affinity, maybe the GPU NUMA ID
            rest = text[m.end():].split()[len(self.header):]
            if len(rest) >= 2 and CPU_LIST.fullmatch(rest[0]) and (rest[1].isdigit() or rest[1] == "N/A"):
                topo.setdefault("numa", {})[name] = rest[1]
        return True

    def end(self) -> None:
        topo = self.ev.topology if self.ev is not None else {}
        gpus = sorted({a for a, _ in topo.get("links", {}) if a.startswith("GPU")}, key=lambda g: int(g[3:]))
        if gpus and topo.get("gpus") != gpus:
            topo["gpus"] = gpus
            self.ev.add_event("topology", self.src, self.first, f"nvidia-smi topo -m: {len(gpus)} GPU(s)")


FORMAT = Topo()
