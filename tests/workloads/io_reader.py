"""A DataLoader with 2 workers that starve the loop, and reads from storage (the page cache
dropped for each chunk, so every read reaches the disk): ``io_reader.py CASE DIR [SECONDS]``.

- ``workers``: each sample reads 1 MiB of a file in DIR (over 100 MiB/s in all, 40 on a
  host loaded four times over): the loader's reads.
- ``main``: the samples are made in memory; a thread of the main process reads the file
  at about 25 MiB/s beside the loop (as a start-up's imports, a logger or a checkpoint
  would): not the loader's.
"""

import os
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

CASE, DIR = sys.argv[1], sys.argv[2]
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 6.0
CHUNK = (1 << 20) if CASE == "workers" else (256 << 10)
SIZE = 32 << 20
PATH = os.path.join(DIR, "data.bin")


def open_uncached() -> int:
    fd = os.open(PATH, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: what is asked is read
    return fd


def read_chunk(fd: int, i: int) -> bytes:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # from the disk, not the page cache
    return os.pread(fd, CHUNK, (i * CHUNK) % SIZE)


class Data(Dataset):
    def __init__(self, reads: bool) -> None:
        self.reads, self.fd = reads, None

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int):
        if self.reads:
            if self.fd is None:
                self.fd = open_uncached()
            read_chunk(self.fd, i)
        time.sleep(0.01)
        return torch.randn(8), torch.randn(1)


def main_reader(stop: threading.Event) -> None:
    fd, i = open_uncached(), 0
    while not stop.is_set():
        read_chunk(fd, i)
        i += 1
        time.sleep(0.01)


if __name__ == "__main__":
    with open(PATH, "wb") as f:
        f.write(os.urandom(SIZE))
        f.flush()
        os.fsync(f.fileno())
    stop = threading.Event()
    if CASE == "main":
        threading.Thread(target=main_reader, args=(stop,), daemon=True).start()
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.time() + SECONDS
    for x, y in DataLoader(Data(CASE == "workers"), batch_size=4, num_workers=2):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        time.sleep(0.005)
        if time.time() > end:
            break
    stop.set()
    print("done", CASE, flush=True)
