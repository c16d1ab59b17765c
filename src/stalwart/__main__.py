"""``python -m stalwart``: the ``stalwart`` command, for environments without the script."""

from .cli import main

main()
