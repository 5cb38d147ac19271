"""`nvidia-smi dmon` (any `-s`, `-o DT`): a `# gpu …` header, a `# Idx …` units line, then one
row per GPU per sample; the header repeats. A capture started in the background writes its rows
between a server's lines: once a header was seen, a line that fits its columns is a row again.
`--format csv` (and collectors that save dmon as CSV, often with their own first column such as
`time`): the same header and units, comma-separated."""
from __future__ import annotations

from datetime import datetime

from .base import FormatReader, LineFormat
from .gpu_common import Rows, gpu_index, num
from ...lazyre import lazy

HEADER = lazy(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\b")
UNITS = lazy(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b")
# comma-separated: `#gpu, pwr, …`, `time,gpu,pwr,…`; its units `#Idx, W, …`, `s,Idx,W,…`
CSV_HEADER = lazy(r"^#?\s*(?:[A-Za-z][\w ]*,\s*){0,2}gpu\s*,\s*(?:pwr|sm|gtemp|mem|fb)\s*,")
CSV_UNITS = lazy(r"^#?\s*(?:[\w:]+,\s*){0,2}Idx\s*,")
# dmon column → normalized key (scale applied to turn the tool's unit into ours)
COLS = {"pwr": ("power_w", 1), "gtemp": ("temp_c", 1), "temp": ("temp_c", 1), "sm": ("util", 1),
        "mem": ("mem_util", 1), "mclk": ("mem_clock_mhz", 1), "pclk": ("sm_clock_mhz", 1),
        "fb": ("mem_used_mib", 1e6 / 2**20), "rxpci": ("pcie_rx_mbs", 1), "txpci": ("pcie_tx_mbs", 1),
        "pviol": ("power_violation_pct", 1), "tviol": ("thermal_violation", 1)}


class Dmon(LineFormat):
    kind = "gpu-dmon"
    keywords = ("# gpu", "#gpu", "# Date", "#Date", "# Time", "#Time", "# Idx", "#Idx", "gpu,", "gpu, ")

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = Dmon.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.cols: list[str] | None = None
        self.csv = False            # comma-separated (`--format csv`, a collector's CSV)
        self.rows: Rows | None = None
        self.first = None

    @property
    def armed(self) -> bool:
        return self.cols is not None

    def open(self, n, text, ev, before=False):
        s = text.strip()
        if HEADER.match(s) or CSV_HEADER.match(s) or (self.cols is not None and (UNITS.match(s) or CSV_UNITS.match(s))):
            pass
        elif self.cols is None or not self._fits(s):
            return False
        if self.rows is None or self.rows.ev is not ev or self.rows.before != before:
            self._note()
            self.rows = Rows(ev, before)
        self.first = self.first or n
        return self.more(n, text)

    def _split(self, s: str) -> list[str]:
        return [t.strip() for t in s.split(",")] if self.csv else s.split()

    def _fits(self, s: str) -> bool:
        toks = self._split(s)
        return len(toks) == len(self.cols) and gpu_index(dict(zip(self.cols, toks)).get("gpu")) is not None

    def more(self, n, text):
        s = text.strip()
        if not s:
            return True         # a blank line inside a capture (a pasted terminal): the rows go on
        if HEADER.match(s) and "," not in s:
            self.cols, self.csv = s.lstrip("#").split(), False
            return True
        if CSV_HEADER.match(s):
            self.cols, self.csv = [t.strip() for t in s.lstrip("#").split(",")], True
            return True
        if UNITS.match(s) or CSV_UNITS.match(s):
            return True
        if self.cols is None or s.startswith(("#", "$")):
            return False
        toks = self._split(s)
        if len(toks) != len(self.cols):
            return False
        row = dict(zip(self.cols, toks))
        gpu = gpu_index(row.get("gpu"))
        if gpu is None:
            return False
        when = None
        if "Date" in row and "Time" in row:
            try:
                when = datetime.strptime(row["Date"] + " " + row["Time"], "%Y%m%d %H:%M:%S")
            except ValueError:
                pass
        elif "Time" in row:
            self.rows.ev.counters["gpu_time_only"] = 1
            try:
                when = datetime.strptime(row["Time"], "%H:%M:%S")
            except ValueError:
                pass
        out = {"time": when, "gpu": gpu, "source": self.src, "line": n}
        for c, (key, scale) in COLS.items():
            if c in row:
                v = num(row[c])
                out[key] = v * scale if v is not None else None
        self.rows.add(out)
        return True

    def _note(self) -> None:
        if self.rows is not None:
            self.rows.note(self.src, self.first or 1, "nvidia-smi dmon")

    def finish(self) -> None:
        self._note()
        self.rows = None


FORMAT = Dmon()
