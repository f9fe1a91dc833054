"""ppdsl: pipeline-parallel training schedules as declarative `.sched` files."""

__version__ = "0.1.0"
