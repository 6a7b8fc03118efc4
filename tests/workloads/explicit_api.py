"""A loop perftop cannot see by itself (no torch training calls): the explicit API."""

import time

import perftop

for _ in range(10):
    with perftop.phase("compute"):
        time.sleep(0.005)
    perftop.step()
print("explicit done")
