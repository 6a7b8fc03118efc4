"""Bottleneck hints: small pure rules over snapshots, and the engine that makes them
persist (see ``engine.py``). Each rule module documents the ids it gives."""

from perftop.hints.engine import RULES, HintEngine, evaluate, order
from perftop.hints.session import SessionHints, hinted_session

__all__ = ["RULES", "HintEngine", "SessionHints", "evaluate", "hinted_session", "order"]
