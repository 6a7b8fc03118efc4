"""The live terminal UI (Textual). Nothing outside ``perftop.tui`` imports Textual."""
