"""Example models for `ppdsl run --model examples.<module>:build` (run from the repository root)."""
