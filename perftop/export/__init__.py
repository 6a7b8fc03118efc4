"""Recordings as other tools read them: Chrome trace JSON (Perfetto), CSV (pandas)."""
