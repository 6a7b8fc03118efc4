"""The command flows: a hub into a recording and a TUI (or a headless wait), then a summary.

One public home for what `run`, `attach`, `attach --ssh` and `collect` share.
"""
