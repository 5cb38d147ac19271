"""Sources: turn inputs into Evidence. A new log format gets recognised in a module here.

The face of the package; the work is in its modules:
- reader.py resolves paths, globs, `-` and `.gz` into inputs and reads their bytes;
- sniff.py says what an input is (log, scrape, GPU samples, structured records, benchmark result);
- loading.py reads each one into Evidence: a log through the scanner (scanner.py, or the C scanner
  in native/ for big files), the prefix peeler (lineprefix.py), the shared-line parser
  (common_lines.py) and the engine parsers (engines/<name>/lines.py, one folder per engine); whole-file formats
  through structured.py, load-test results through bench.py, scrapes through prometheus.py,
  GPU samples through gpu.py;
- grouping.py splits inputs of different engines into different deployments;
- progress.py and unreadable.py: the progress bar, and lines that are not text.
"""
from __future__ import annotations

from .grouping import load_groups
from .loading import load, start_scans
from .readers.files import Input, InputError, resolve

__all__ = ["load", "load_groups", "start_scans", "Input", "InputError", "resolve"]
