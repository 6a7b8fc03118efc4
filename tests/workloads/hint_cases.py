"""Short CPU trainings (a few seconds: too short for the live engine) that each show some
hints, and their near-misses: ``hint_cases.py CASE [STEPS]``.

- ``starved``: num_workers=0 and a slow dataset (input-bound), a nonzero() every step
  (host-device-sync).
- ``near``: the near-misses of both: the loop waits 1 ms of a ~11 ms step for data (in
  the process: workers' IPC on a loaded 2-core box would add its own wait); nonzero() on
  9 steps out of 10 (0.9 per step, under the bar of 1; run it under PERFTOP_SYNC=all).
- ``producer``: a thread iterates the DataLoader into a queue ahead of the loop, which
  itself waits for its batches under 1% of the time (no input-bound).
- ``between``: a no_grad evaluation over in-memory tensors (2 s) every 16 steps, more
  than half of the run (between-steps; run it with 96 steps).
"""

import queue
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

CASE = sys.argv[1]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 200


class Data(Dataset):
    def __init__(self, sleep_s: float = 0.0, spin_s: float = 0.0, every: int = 1) -> None:
        self.sleep_s, self.spin_s, self.every = sleep_s, spin_s, every

    def __len__(self) -> int:
        return STEPS * 4

    def __getitem__(self, i: int):
        if self.sleep_s and (self.every == 1 or i % self.every == 0):
            time.sleep(self.sleep_s)
        end = time.process_time() + self.spin_s
        while time.process_time() < end:  # work on the CPU, as a transform does
            pass
        return torch.randn(8), torch.randn(1)


def step(model, opt, x, y, i: int, sync_every: int, compute_s: float) -> None:
    loss = ((model(x) - y) ** 2).mean()
    if sync_every and i % 10 < sync_every:
        (y > 0).nonzero()  # a host-device sync on a GPU
    opt.zero_grad()
    loss.backward()
    opt.step()
    if compute_s:
        time.sleep(compute_s)


def main() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)  # tiny: sleeps set the timings, robust on a busy host
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if CASE == "starved":
        loader = DataLoader(Data(sleep_s=0.002), batch_size=4)
        for i, (x, y) in enumerate(loader):
            step(model, opt, x, y, i, 10, 0.0)  # waits 8 ms of a ~9 ms step
    elif CASE == "near":
        # one sleep a batch and one a step: a busy host's late wake-ups stretch each once
        loader = DataLoader(Data(sleep_s=0.001, every=4), batch_size=4)
        for i, (x, y) in enumerate(loader):
            step(model, opt, x, y, i, 9, 0.010)  # waits ~1 ms of a ~11 ms step
    elif CASE == "producer":
        q: queue.Queue = queue.Queue(maxsize=64)

        def produce() -> None:
            for b in DataLoader(Data(sleep_s=0.001), batch_size=4):
                q.put(b)
            q.put(None)

        threading.Thread(target=produce, daemon=True).start()
        time.sleep(1.0)  # the producer gets ahead
        waited, t0, i = 0.0, time.perf_counter(), 0
        while True:
            a = time.perf_counter()
            b = q.get()
            waited += time.perf_counter() - a
            if b is None:
                break
            step(model, opt, *b, i, 0, 0.005)
            i += 1
        print(f"own data wait {waited / (time.perf_counter() - t0):.3f}")
    elif CASE == "between":
        x, y = torch.randn(64, 8), torch.randn(64, 1)
        evals, spent = 0, 0.0
        for i in range(STEPS):
            step(model, opt, x, y, i, 0, 0.02)
            if i % 16 == 15:
                t = time.perf_counter()
                with torch.no_grad():  # an estimate_loss() of nanoGPT's kind
                    for _ in range(10):
                        model(x)
                        time.sleep(0.2)
                evals, spent = evals + 1, spent + time.perf_counter() - t
        print(f"own evals {evals} {spent:.3f}")
    print("done", CASE)


if __name__ == "__main__":
    main()
