"""A plain loop on a tiny GPT-2 built from a config (nothing downloaded), as accelerate's
``no_trainer`` examples train: 20 optimizer steps, the model saved with
``save_pretrained`` every 5 (the weights' state dict and its conversion, the safetensors
file, the config files), each call timed by the job. Prints the times as JSON."""

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# transformers first, as many scripts begin: its import is the job's first of torch
from transformers import GPT2Config, GPT2LMHeadModel  # isort: skip
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=64, n_layer=2, n_head=2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 64, (80, 16), generator=torch.Generator().manual_seed(0))
own = {"save_s": [], "steps": 0}
out = sys.argv[1] if len(sys.argv) > 1 else "hf-out"
for i in range(20):
    batch = ids[4 * i : 4 * i + 4]
    loss = model(input_ids=batch, labels=batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    own["steps"] += 1
    if own["steps"] % 5 == 0:
        t = time.perf_counter()
        model.save_pretrained(os.path.join(out, f"step{own['steps']}"))
        own["save_s"].append(time.perf_counter() - t)
print(json.dumps(own))
