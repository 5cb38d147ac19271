"""`nvidia-smi nvlink --status` (and `nvidia-smi -L`, which is its GPU lines alone): each GPU by
name and UUID, then its links with their speed or `<inactive>`."""
from __future__ import annotations

from .base import FormatReader, LineFormat
from .gpu_common import gpu_index, gpu_info
from ...lazyre import lazy

GPU = lazy(r"^GPU (?P<i>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)")
LINK = lazy(r"^\s+Link (?P<k>\d+): (?P<v><inactive>|<not supported>|[\d.]+ GB/s)")


class NvLink(LineFormat):
    kind = "gpu-nvlink"
    keywords = ("(UUID: ",)

    def reader(self, src, info):
        return _Reader(src)


class _Reader(FormatReader):
    kind = NvLink.kind

    def __init__(self, src: str) -> None:
        self.src = src
        self.ev = None
        self.cur = None

    def open(self, n, text, ev, before=False):
        if not GPU.match(text.strip()):
            return False
        self.ev = ev
        return self.more(n, text)

    def more(self, n, text):
        m = GPU.match(text.strip())
        if m:
            self.cur = gpu_index(m.group("i"))
            if self.cur is not None:
                gpu_info(self.ev, self.cur, name=m.group("name"))
                self.ev.set_fact("gpu_name", m.group("name").strip(), self.src, n, text.strip(), override=False)
            return True
        m = LINK.match(text)
        if not m or self.cur is None:
            return False
        info = self.ev.gpu_info[self.cur]
        info.setdefault("nvlink_active_links", 0)
        if m.group("v") == "<inactive>":
            self.ev.add_event("nvlink_inactive", self.src, n, f"GPU {self.cur}: {text.strip()}")
        elif m.group("v").endswith("GB/s"):
            info["nvlink_active_links"] += 1
        return True


FORMAT = NvLink()
