"""Epochs of CPU training with non-persistent DataLoader workers (new pids every epoch),
an evaluation pass and a checkpoint between epochs: ``epochs_train.py EPOCHS STEPS
[fresh-eval]``; with ``fresh-eval`` each evaluation makes a new loader with 2 workers of
its own, as the HF Trainer's ``get_eval_dataloader()`` does."""

import io
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
FRESH_EVAL = sys.argv[3:] == ["fresh-eval"]


class Slow(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self):
        return self.n * 4

    def __getitem__(self, i):
        time.sleep(0.005)
        return torch.randn(8), torch.randn(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train = DataLoader(Slow(STEPS), batch_size=4, num_workers=2)
    val = DataLoader(Slow(5), batch_size=4)
    for _ in range(EPOCHS):
        for x, y in train:
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)  # the model's own compute
        if FRESH_EVAL:
            val = DataLoader(Slow(5), batch_size=4, num_workers=2)
        with torch.no_grad():
            for x, _y in val:
                model(x)
        torch.save(model.state_dict(), io.BytesIO())
    print("trained", EPOCHS, "epochs")
