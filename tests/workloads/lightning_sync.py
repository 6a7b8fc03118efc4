"""A tiny Lightning fit whose ``training_step`` has two sync sites of the user's own
(each marked SITE). Lightning's own syncs must be reported at the user's ``trainer.fit``
line (or the user's ``self.log`` line), with the lightning line as detail."""

import os
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        err = (self.net(x) - y).pow(2)
        big = err[err > 0.5]  # SITE boolean_mask
        loss = err.mean() + 0.0 * big.sum()
        if loss.item() > 1e9:  # SITE item
            raise RuntimeError("diverged")
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
trainer = L.Trainer(
    max_steps=8,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=sys.argv[1] if len(sys.argv) > 1 else os.getcwd(),
)
trainer.fit(Model(), DataLoader(data, batch_size=8))  # FIT
print("done")
