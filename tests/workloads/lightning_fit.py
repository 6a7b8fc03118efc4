"""A Lightning fit (automatic optimization: every optimizer step gets a closure) with a
validation every 4 training batches and the default sanity check. Prints ``steps N``."""

import sys
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore")
out = sys.argv[1] if len(sys.argv) > 1 else "lightning-out"


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
        )

    def training_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def data(n: int) -> DataLoader:
    return DataLoader(TensorDataset(torch.randn(n, 16), torch.randn(n, 1)), batch_size=8)


trainer = L.Trainer(
    max_steps=12,
    val_check_interval=4,
    limit_val_batches=4,
    accelerator="cpu",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=out,
)
trainer.fit(Tiny(), data(256), data(64))
print("steps", trainer.global_step)
