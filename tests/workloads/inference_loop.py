"""Inference over a DataLoader: no backward(), no optimizer (mmengine's ``runner.test()``,
a batch-scoring script). Prints its own count of batches as JSON."""

import json

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(640, 8)),
                                     batch_size=16)  # fmt: skip
own = {"batches": 0, "positive": 0}
for (x,) in loader:
    with torch.no_grad():
        own["positive"] += int(model(x).argmax(1).sum())
    own["batches"] += 1
print(json.dumps(own))
