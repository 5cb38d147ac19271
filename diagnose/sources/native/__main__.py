"""python -m diagnose.sources.native: builds the C scanner if needed and says whether it is in use."""
from .. import native

if native.load() is not None:
    print(f"C scanner: {native.library_path()}" if native.where is None else f"C scanner: {native.where}")
else:
    print(f"C scanner not in use: {native.why_not} (big logs are read with polars)")
