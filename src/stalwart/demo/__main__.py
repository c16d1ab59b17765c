"""``python -m stalwart.demo [child ...]``: the demo, or its child's part.

The policies live in :mod:`stalwart.demo.agent`, imported under that name in
both processes, so what a run records is the same whichever process wrote it.
"""

import sys

from .play import main

sys.exit(main())
