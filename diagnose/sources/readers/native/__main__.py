"""python -m diagnose.sources.readers.native: says whether the C scanner is in use, and if not, why.
With --build: builds it again in place (after scan.c was edited in a checkout)."""
import sys

from .. import native
from .build import BuildError, build

if sys.argv[1:] == ["--build"]:
    try:
        print(f"built {build()}")
    except BuildError as e:
        sys.exit(f"diagnose: {e}")
elif native.load() is not None:
    print(f"C scanner: {native.LIBRARY}")
else:
    print(f"C scanner not in use: {native.why_not} (big logs are read by the Python reader, several times slower)")
