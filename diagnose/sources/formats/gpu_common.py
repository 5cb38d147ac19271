"""What the GPU-sample formats share: numbers as the tools print them, per-GPU facts, and rows.

Units differ by tool; rows are normalized to W, MHz, MiB, %. Columns are always mapped by header
name (dmon orders groups as `-s` lists them, query CSV as `--query-gpu` lists them)."""
from __future__ import annotations

from ...evidence.model import Evidence
from ...lazyre import lazy

_NUM = lazy(r"^-?[\d.]+")


def num(tok: str):
    """A number as nvidia-smi prints it (`45`, `45 %`, `81920 MiB`); None for `-`, `N/A`, `[Not
    Supported]` or a value no GPU reports (400 digits read as inf: no sample)."""
    tok = tok.strip()
    if tok in ("-", "", "N/A") or tok.startswith("["):
        return None
    m = _NUM.match(tok)
    if not m:
        return None
    try:
        x = float(m.group())
    except ValueError:
        return None
    return x if -1e15 < x < 1e15 else None


def gpu_info(ev: Evidence, idx: int, **kw) -> None:
    d = ev.gpu_info.setdefault(idx, {})
    for k, v in kw.items():
        if v is not None:
            d[k] = v


def gpu_index(tok) -> int | None:
    """A GPU index as a capture gives it; None for what no machine has (5000 digits, `-1`)."""
    try:
        i = int(tok)
    except (TypeError, ValueError):
        return None
    return i if 0 <= i < 100_000 else None


class Rows:
    """Rows of one capture into one Evidence, counted per GPU (the cycle number of each sample).
    Rows read while no server had started in the input are tagged `before`: if a launch follows
    (a job's `nvidia-smi` at its start: idle GPUs), they are no samples of the run and are
    dropped then (sources/launches.py); a capture alone keeps them."""

    def __init__(self, ev: Evidence, before: bool = False) -> None:
        self.ev, self.before = ev, before
        self.cycles: dict[int, int] = {}
        self.kept = 0

    def add(self, row: dict) -> None:
        gpu = row["gpu"]
        self.cycles[gpu] = self.cycles.get(gpu, 0) + 1
        row["cycle"] = self.cycles[gpu]
        if self.before:
            row["before"] = True
        self.ev.gpu_rows.append(row)
        self.kept += 1

    def note(self, src: str, line: int, what: str) -> None:
        """The event that says what the capture held (once per input, format and launch)."""
        if self.kept:
            self.ev.add_event("gpu_samples", src, line, f"{what}: {self.kept} rows for {len(self.cycles)} GPU(s)",
                              before=self.before)
