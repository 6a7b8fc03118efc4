"""A training loader whose 2 workers (started anew each epoch) are too slow, and after each
epoch an evaluation over a validation loader of its own with no workers, then over the
training set (its loss, the same loader under ``no_grad``); with ``grad_on``, the training
set's first, then the validation with grad on and the model in eval mode (no
``no_grad``)."""

import contextlib
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Samples(Dataset):
    def __len__(self) -> int:
        return 160

    def __getitem__(self, i: int):
        time.sleep(0.004)  # 32 ms a batch in each worker
        return torch.randn(16), torch.randn(1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train = DataLoader(Samples(), batch_size=8, num_workers=2)
    val = DataLoader(TensorDataset(torch.randn(64, 16), torch.randn(64, 1)), batch_size=8)
    grad_on = "grad_on" in sys.argv[1:]
    steps = 0
    for _ in range(3):
        for x, y in train:
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        for part in ("train", "val") if grad_on else ("val", "train"):
            if part == "train":
                with torch.no_grad():
                    for x, _y in train:
                        model(x)
                continue
            model.eval()
            with contextlib.nullcontext() if grad_on else torch.no_grad():
                for x, _y in val:
                    model(x)
            model.train()
    print("trained", steps)
