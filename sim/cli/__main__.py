"""``python -m sim.cli ...``: the ``protolab`` command."""

from . import main

main()
