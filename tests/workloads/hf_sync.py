"""A tiny HF Trainer run (model from a config, in-memory data, nothing downloaded) whose
custom ``compute_loss`` has two sync sites of the user's own (each marked SITE). The
Trainer's own syncs (its loss logging, for one) must be reported at the user's
``trainer.train()`` line, with the transformers line as detail."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

torch.manual_seed(0)
config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16)
model = GPT2LMHeadModel(config)
data = [{"input_ids": torch.randint(0, 64, (8,)), "labels": torch.randint(0, 64, (8,))}] * 32
seen = []


class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = model(**inputs)
        loss = out.loss
        kept = out.logits[out.logits > 0]  # SITE boolean_mask
        seen.append(loss.item())  # SITE item
        loss = loss + 0.0 * kept.sum()
        return (loss, out) if return_outputs else loss


args = TrainingArguments(
    output_dir=sys.argv[1] if len(sys.argv) > 1 else "hf_out",
    per_device_train_batch_size=4,
    max_steps=8,
    logging_steps=2,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    dataloader_num_workers=0,
    disable_tqdm=True,
)
trainer = MyTrainer(model=model, args=args, train_dataset=data)
trainer.train()  # TRAIN
print("done", len(seen))
