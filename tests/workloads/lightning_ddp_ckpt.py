"""Lightning's ``ddp`` strategy on 2 CPU ranks (gloo) with a ``ModelCheckpoint`` every 10
training steps, its file written by rank 0 alone through a ``CheckpointIO`` that takes
half a second first (a slow filesystem's write): the trainer's ``save_checkpoint`` then
waits at its barrier on rank 1 for as long. Prints one JSON line per rank: its rank, its
steps and each checkpoint's wall-clock bounds, as the trainer's ``save_checkpoint`` took
it on that rank."""

import json
import sys
import time
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO
from torch.utils.data import DataLoader, TensorDataset

SLOW_S = 0.5
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
own = {"saves": []}


class SlowIO(TorchCheckpointIO):
    def save_checkpoint(self, *args, **kwargs):
        time.sleep(SLOW_S)
        super().save_checkpoint(*args, **kwargs)


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(32, 8)

    def training_step(self, batch, i):
        (x,) = batch
        return self.net(x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


out = sys.argv[1]
trainer = L.Trainer(
    max_steps=30,
    accelerator="cpu",
    devices=2,
    strategy="ddp",
    logger=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=out,
    plugins=[SlowIO()],
    callbacks=[ModelCheckpoint(dirpath=out, every_n_train_steps=10, save_top_k=-1)],
)
save = trainer.save_checkpoint


def timed(*args, **kwargs):
    wall = time.time()
    save(*args, **kwargs)
    own["saves"].append((wall, time.time()))


trainer.save_checkpoint = timed  # the instance's: ModelCheckpoint calls it
trainer.fit(Tiny(), DataLoader(TensorDataset(torch.randn(2000, 32)), batch_size=16))
# one write a line: two ranks' prints (text, then newline) interleave where unbuffered
sys.stdout.write(
    json.dumps({"rank": trainer.global_rank, "steps": trainer.global_step, **own}) + "\n"
)
sys.stdout.flush()
