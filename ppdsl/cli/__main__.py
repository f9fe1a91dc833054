"""`python -m ppdsl.cli`: the `ppdsl` command."""

from ppdsl.cli import main

main()
