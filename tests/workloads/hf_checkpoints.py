"""The HF Trainer on a tiny GPT-2 built from a config (nothing downloaded), 20 optimizer
steps with a checkpoint every 5, no evaluation. The job times each whole checkpoint
itself (the Trainer's ``_save_checkpoint``, around its own call: weights, config files,
optimizer, scheduler, RNG states, the state's JSON) and prints the times as JSON."""

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

# transformers first, as many scripts begin: its Trainer's import is the job's first of
# torch, so the hook arms while transformers.trainer is still executing (its Trainer not
# yet defined: the whole-checkpoint timing was missed until 5 Dec 2026)
from transformers import Trainer, TrainingArguments  # isort: skip
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
torch.set_num_threads(1)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=64, n_layer=2, n_head=2))
own = {"checkpoint_s": []}


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(n))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Timed(Trainer):
    def _save_checkpoint(self, model, trial):
        t = time.perf_counter()
        try:
            return super()._save_checkpoint(model, trial)
        finally:
            own["checkpoint_s"].append(time.perf_counter() - t)


args = TrainingArguments(
    output_dir=sys.argv[1] if len(sys.argv) > 1 else "hf-out", per_device_train_batch_size=4,
    max_steps=20, save_strategy="steps", save_steps=5, logging_strategy="no", report_to=[],
    use_cpu=True, dataloader_num_workers=0, disable_tqdm=True,
)  # fmt: skip
trainer = Timed(model=model, args=args, train_dataset=Tokens(200))
trainer.train()
own["steps"] = trainer.state.global_step
print(json.dumps(own))
