"""Bottleneck hints: small pure rules over snapshots, and the engine that makes them
persist (see ``engine.py``). Each rule module documents the ids it gives."""

from perftop.hints.engine import RULES, HintEngine, evaluate, order

__all__ = ["RULES", "HintEngine", "evaluate", "order"]
