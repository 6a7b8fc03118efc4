"""Stands in for a newer perftop on a remote: writes a session of format 99 and exits."""

import sys

from perftop.events import SessionStart
from perftop.wire import MAGIC, encode_frame

sys.stdout.buffer.write(MAGIC + encode_frame([SessionStart(1.0, ("x",), "/", "r", 1, "9", 99)]))
