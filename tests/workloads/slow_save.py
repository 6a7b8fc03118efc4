"""Short steps, and after step ``argv[1]`` a checkpoint written through a slow file object
(a network filesystem's stand-in: its first write blocks ``argv[2]`` seconds): one
``torch.save`` far past 5x the median step and 2 s, then more steps. Prints the save's own
time."""

import io
import sys
import time

import torch

SAVE_AT, SAVE_S = int(sys.argv[1]), float(sys.argv[2])


class SlowDisk(io.BytesIO):
    """A file object whose first write waits, as a mount that is slow to answer."""

    waited = False

    def write(self, b):  # type: ignore[override]
        if not self.waited:
            self.waited = True
            time.sleep(SAVE_S)
        return super().write(b)


torch.manual_seed(0)
model = torch.nn.Linear(32, 1)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 32), torch.randn(64, 1)
for i in range(2 * SAVE_AT):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    time.sleep(0.01)
    if i == SAVE_AT - 1:
        t0 = time.perf_counter()
        torch.save(model.state_dict(), SlowDisk())
        print(f"save {time.perf_counter() - t0:.6f} s", flush=True)
print(f"{2 * SAVE_AT} steps", flush=True)
