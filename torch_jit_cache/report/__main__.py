"""`python -m torch_jit_cache.report DIR [-o report.html]` (see __init__.py)."""
import sys

from . import main

sys.exit(main())
