"""Replaying recordings: an index of model checkpoints built in the background, a player
that seeks with it, and the controller that plays. No Textual here: the TUI posts what the
controller hands it (see :mod:`perftop.tui.replay`)."""
