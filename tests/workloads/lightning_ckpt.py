"""A Lightning fit with ``ModelCheckpoint`` every 10 training steps (``steps``, the default)
or at the end of a validation every 10 steps, on its monitored metric (``val``): Lightning
serializes each checkpoint with ``torch.save`` into memory, then writes the file through
fsspec (``_atomic_save``). Prints one JSON line: the steps and each checkpoint's time, as
the trainer's ``save_checkpoint`` took it (its state dicts, serialization and write)."""

import json
import sys
import time
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")
out = sys.argv[1] if len(sys.argv) > 1 else "lightning-ckpt-out"
on_val = len(sys.argv) > 2 and sys.argv[2] == "val"
torch.set_num_threads(1)
own = {"steps": 0, "saves": [], "save_at": []}


class Wide(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        # 2.1M parameters: a checkpoint of ~25 MB with Adam's two moments
        self.net = torch.nn.Sequential(
            torch.nn.Linear(32, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 2048)
        )

    def training_step(self, batch, i):
        (x,) = batch
        return self.net(x).pow(2).mean()

    def on_train_batch_end(self, *args) -> None:
        own["steps"] = self.trainer.global_step

    def validation_step(self, batch, i):
        (x,) = batch
        self.log("val", self.net(x).pow(2).mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-4)


every = (
    {"monitor": "val", "save_top_k": -1}
    if on_val
    else {"every_n_train_steps": 10, "save_top_k": -1}
)
trainer = L.Trainer(
    max_steps=40,
    accelerator="cpu",
    devices=1,
    logger=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
    default_root_dir=out,
    callbacks=[ModelCheckpoint(dirpath=out, **every)],
    val_check_interval=10 if on_val else None,
    check_val_every_n_epoch=None if on_val else 1,
    limit_val_batches=4 if on_val else 0,
)
save = trainer.save_checkpoint


def timed(*args, **kwargs):
    t, wall = time.perf_counter(), time.time()
    save(*args, **kwargs)
    own["saves"].append(time.perf_counter() - t)
    own["save_at"].append((wall, time.time()))


trainer.save_checkpoint = timed  # the instance's: ModelCheckpoint calls it
loader = DataLoader(TensorDataset(torch.randn(640, 32)), batch_size=16)
trainer.fit(Wide(), loader, DataLoader(TensorDataset(torch.randn(64, 32)), batch_size=16))
print(json.dumps(own), flush=True)
