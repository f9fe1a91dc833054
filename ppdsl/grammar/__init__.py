"""The .sched grammar and its parser."""
