"""What an input is, from its first bytes: a log, a Prometheus scrape, GPU samples, structured
records (JSON/YAML) or a benchmark result. Each reader's own sniffer decides; this module only asks
them in order, on a head with its unreadable lines blanked."""
from __future__ import annotations

import os
import stat

from .formats.gpu import sniff_gpu
from .prometheus import sniff_prometheus
from .readers.files import Input
from .formats.structured import sniff
from .readers.unreadable import blank_unreadable

SNIFF_BYTES = 512 * 1024

def sniff_head(first: bytes) -> bytes:
    # Sniffed without its unreadable lines, which every reader skips: one damaged line (a
    # `vllm:…` metric cut by a NUL at the top of an SGLang log) turned a whole log into a "scrape".
    return blank_unreadable(first[:SNIFF_BYTES])[0] if first else b""

def is_log(first: bytes) -> bool:
    """Whether load_one reads an input that starts with `first` as a log (not a scrape, GPU
    samples or structured records)."""
    head = sniff_head(first)
    return not (first and (sniff_prometheus(head) or sniff_gpu(head) or sniff(head)))

def endless_binary(inp: Input, first: bytes) -> bool:
    """A device, FIFO or stdin whose first block is binary (`/dev/zero`, `/dev/urandom`, a pipe of
    a core dump): it may never end, and it is no log. A regular file is read to its end and
    judged by the line scanner, which counts what it cannot read."""
    if b"\x00" not in first[:8192]:
        return False
    try:
        mode = os.fstat(0).st_mode if inp.path == "-" else os.stat(inp.path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)
