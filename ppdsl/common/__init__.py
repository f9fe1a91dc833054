"""The bottom layer: what every other layer uses and nothing of ppdsl's own below it.

Diagnostics and their code registry, atomic file output, memory units. Imports nothing from ppdsl.
"""
