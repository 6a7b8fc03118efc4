"""A CPU training with 2 DataLoader workers whose step STALL_AT sleeps in a named slow
function (a stand-in for a slow checkpoint) for STALL_S seconds. ``thread`` as the fourth
argument: the loop runs on a thread of its own while the main thread waits in a join (a
Ray Train worker's shape); it prints ``train_tid N``, the thread's native id, and at its
end ``train_wait S``, the seconds that thread waited for a core (schedstat)."""

import sys
import threading
import time

import torch
from core_wait import run_delay
from torch.utils.data import DataLoader, Dataset

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
STALL_AT = int(sys.argv[2]) if len(sys.argv) > 2 else 12
STALL_S = float(sys.argv[3]) if len(sys.argv) > 3 else 3.5


class Data(Dataset):
    def __len__(self):
        return STEPS * 4

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.randn(8), torch.randn(1)


def save_checkpoint_slowly(model):
    time.sleep(STALL_S)


def train():
    if THREAD:
        print("train_tid", threading.get_native_id(), flush=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(DataLoader(Data(), batch_size=4, num_workers=2)):
        if i == STALL_AT:
            save_checkpoint_slowly(model)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.02)
    if THREAD:
        print("train_wait", run_delay(), flush=True)
    print("trained", STEPS, flush=True)


THREAD = sys.argv[4:] == ["thread"]
if __name__ == "__main__":
    if THREAD:
        t = threading.Thread(target=train, name="trainer")
        t.start()
        t.join()
    else:
        train()
