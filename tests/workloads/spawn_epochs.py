"""Short epochs behind a spawned, non-persistent DataLoader worker: each epoch starts it
anew, and it imports torch again (``spawn_epochs.py EPOCHS STEPS``). One worker: each
spawned one costs the test seconds of CPU, and one shows the restarts as well as two."""

import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(32 * steps, 32), torch.randn(32 * steps, 1))
    loader = DataLoader(data, batch_size=32, num_workers=1, multiprocessing_context="spawn")
    done = 0
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            done += 1
    print("steps", done, flush=True)


if __name__ == "__main__":
    main()
