"""``python -m stalwart.cli``: the same command, for environments without the script."""

from . import main

main()
