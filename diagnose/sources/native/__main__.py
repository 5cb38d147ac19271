"""python -m diagnose.sources.native: says whether the C scanner is in use, and builds it."""
from . import library_path, load, why_not  # noqa: F401

lib = load()
from . import why_not as reason  # noqa: E402  (set by load())

print(f"C scanner: {library_path()}" if lib else f"C scanner not in use: {reason} (big logs are read with polars)")
