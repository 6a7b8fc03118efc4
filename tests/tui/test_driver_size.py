"""Textual's App.size before the first Resize: the terminal's size, not stale COLUMNS/LINES."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios

PROBE = """
import asyncio
from perftop.tui.app import PerftopApp

async def main():
    app = PerftopApp()
    app._driver = app.get_driver_class()(app)
    print(tuple(app.size), flush=True)

asyncio.run(main())
"""


def test_the_size_asked_before_the_first_resize_is_the_terminals() -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = dict(os.environ, COLUMNS="100", LINES="30")
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], stdin=slave, stdout=subprocess.PIPE,
                             stderr=slave, env=env, text=True, timeout=60)  # fmt: skip
    finally:
        os.close(slave)
        os.close(master)
    assert out.stdout.strip().splitlines()[-1] == "(200, 50)", out.stdout
