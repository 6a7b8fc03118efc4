"""REINFORCE's shape: the policy's sampled action goes to the environment (a host
number the host needs every step: ``action.item()``), no loss is read."""

import torch

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
state = [0.0, 0.0, 0.0, 0.0]
for _ in range(30):
    probs = policy(torch.tensor(state)).softmax(-1)
    action = torch.multinomial(probs, 1)
    a = action.item()  # SITE action
    state = [s + (0.1 if a else -0.1) for s in state]  # the environment's step, on the host
    loss = -torch.log(probs[action]).sum() * sum(state)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
