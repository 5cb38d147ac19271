"""The `nvidia-smi` table a job prints before its server starts: the driver and CUDA version, then
per GPU its board, power cap, memory and utilisation at that moment. It names the boards (the
roofline needs them); its one reading is a snapshot, never a sample of the run."""
from __future__ import annotations

from .base import FormatReader, LineFormat
from .gpu_common import gpu_index, gpu_info
from ...lazyre import lazy

HEAD = lazy(r"NVIDIA-SMI\s+(?P<smi>[\d.]+)\s+Driver Version:\s*(?P<drv>[\d.]+)(?:\s+CUDA Version:\s*(?P<cuda>[\d.]+))?")
# `|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |` (older: `Tesla V100-SXM2…  On   |`)
GPU_ROW = lazy(r"^\|\s+(?P<i>\d+)\s+(?P<name>\S.*?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
# `| N/A   27C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |`
STATE_ROW = lazy(r"^\|\s*\S+\s+(?P<temp>\d+|N/A)C?\s+(?P<perf>P\d+|N/A)\s+(?:(?P<pw>\d+)W|N/A)\s*/\s*(?:(?P<cap>\d+)W|N/A)\s*\|"
                 r"\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|\s*(?P<util>\d+|N/A)%?")
TABLE_LINE = lazy(r"^\s*(?:[|+][\s\S]*[|+]\s*$|\|)")


class SmiTable(LineFormat):
    kind = "gpu-table"
    keywords = ("NVIDIA-SMI",)

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = SmiTable.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.ev = None
        self.gpu = None
        self.first = 0

    def open(self, n, text, ev, before=False):
        m = HEAD.search(text)
        if not m or not text.lstrip().startswith("|"):
            return False
        self.ev, self.gpu, self.first = ev, None, n
        ev.set_fact("driver_version", m.group("drv"), self.src, n, text.strip(), override=False)
        if m.group("cuda"):
            ev.set_fact("cuda_version", m.group("cuda"), self.src, n, text.strip(), override=False)
        return True

    def more(self, n, text):
        s = text.rstrip()
        if not TABLE_LINE.match(s):
            return False
        m = GPU_ROW.match(s.lstrip())
        if m:
            self.gpu = gpu_index(m.group("i"))
            if self.gpu is not None:
                name = m.group("name").strip()
                gpu_info(self.ev, self.gpu, name=name)
                if name.startswith(("NVIDIA", "Tesla", "GeForce", "Quadro", "RTX", "A100", "H100")):
                    self.ev.set_fact("gpu_name", name, self.src, n, s.strip(), override=False)
            return True
        m = STATE_ROW.match(s.lstrip())
        if m and self.gpu is not None:
            gpu_info(self.ev, self.gpu, power_limit_w=float(m.group("cap")) if m.group("cap") else None,
                     memory_total_mib=float(m.group("total")))
            self.ev.add_event("gpu_snapshot", self.src, n,
                              f"GPU {self.gpu}: {m.group('util')} % busy, {m.group('used')} of {m.group('total')} MiB used"
                              + (f", {m.group('pw')} W of {m.group('cap')} W" if m.group("pw") and m.group("cap") else "")
                              + " (nvidia-smi, one reading)")
            self.gpu = None
        return True


FORMAT = SmiTable()
