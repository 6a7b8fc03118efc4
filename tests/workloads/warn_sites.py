"""Warnings raised by torch calls at the job's own lines, in the steps perftop's sync
detector watches (after each update: the step's end puts its mode on the stack): one from
C++ (torch's once-per-process warning for a scalar of a tensor needing grad), one from a
torch Python function that warns at its caller (``stacklevel``), and one that the job's
own filter for its module hides. Plain, each is shown at the line below (or hidden);
under perftop it must be the same."""

import sys
import warnings

import torch
import torch.nn.functional as F

warnings.simplefilter("default")  # whatever PYTHONWARNINGS says (the suite sets ignore)
warnings.filterwarnings("ignore", message=".*log_softmax.*", module="__main__")
torch.manual_seed(0)
model = torch.nn.Linear(8, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for step in range(int(sys.argv[1])):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    seen = float(loss)  # C++: "Converting a tensor with requires_grad=True to a scalar"
    probs = F.softmax(logits.detach())  # Python, at its caller: "Implicit dimension choice"
    logp = F.log_softmax(logits.detach())  # the same, hidden by the filter above
    print(f"step {step} {seen:.4f} {float(probs.sum()):.1f} {float(logp.sum()):.1f}")
