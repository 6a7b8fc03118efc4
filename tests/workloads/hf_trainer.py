"""The HF Trainer on a tiny GPT-2 built from a config (nothing downloaded): gradient
accumulation over 4 micro-batches, an evaluation every 2 optimizer steps (each over a
DataLoader the Trainer makes anew), a checkpoint at step 6. Prints ``steps N`` with the Trainer's optimizer steps."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

out = sys.argv[1] if len(sys.argv) > 1 else "hf-out"
torch.manual_seed(0)
config = GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2)
model = GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(n)
        self.ids = torch.randint(0, 64, (n, 16), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


args = TrainingArguments(
    output_dir=out,
    per_device_train_batch_size=2,
    per_device_eval_batch_size=4,
    gradient_accumulation_steps=4,
    max_steps=6,
    eval_strategy="steps",
    eval_steps=2,
    save_strategy="steps",
    save_steps=6,
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    dataloader_num_workers=0,
    disable_tqdm=True,
)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(64), eval_dataset=Tokens(24))
trainer.train()
print("steps", trainer.state.global_step)
