"""PyG's ``examples/mutag_gin.py`` shape, on a FakeDataset (MUTAG needs a download): a GIN
trained for N epochs, then tested on the training and the test loader each epoch, where
``test`` reads each batch's correct count with ``int()``. Its own counters at the end."""

import json
import random
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn import BatchNorm1d, Linear, ReLU, Sequential
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, global_add_pool

random.seed(0)  # FakeDataset draws its graphs' sizes with random
torch.manual_seed(0)
ds = FakeDataset(num_graphs=120, avg_num_nodes=18, num_channels=7, num_classes=2, task="graph")
train_loader = DataLoader(ds[:96], batch_size=32, shuffle=True)
test_loader = DataLoader(ds[96:], batch_size=32)
device = torch.device("cpu")


class Net(torch.nn.Module):
    def __init__(self, cin: int, hidden: int, cout: int, layers: int = 3) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList()
        for _ in range(layers):
            mlp = Sequential(
                Linear(cin, hidden), BatchNorm1d(hidden), ReLU(), Linear(hidden, hidden)
            )
            self.convs.append(GINConv(mlp, train_eps=False))
            cin = hidden
        self.lin = Linear(hidden, cout)

    def forward(self, x, edge_index, batch):
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        return self.lin(global_add_pool(x, batch))


model = Net(7, 32, 2).to(device)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
counts = {"steps": 0, "tests": 0, "test_batches": 0, "test_s": 0.0}


def train() -> float:
    model.train()
    total = 0.0
    for data in train_loader:
        data = data.to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index, data.batch), data.y)
        loss.backward()
        opt.step()
        counts["steps"] += 1
        total += loss.detach().item() * data.num_graphs  # LOSS_LINE
    return total / len(train_loader.dataset)


@torch.no_grad()
def test(loader) -> float:
    model.eval()
    correct = 0
    for data in loader:
        data = data.to(device)
        pred = model(data.x, data.edge_index, data.batch).argmax(dim=-1)
        correct += int((pred == data.y).sum())  # TEST_LINE
        counts["test_batches"] += 1
    return correct / len(loader.dataset)


for epoch in range(1, int(sys.argv[1]) + 1):
    loss = train()
    t0 = time.perf_counter()
    train_acc, test_acc = test(train_loader), test(test_loader)
    counts["test_s"] += time.perf_counter() - t0
    counts["tests"] += 1
    print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, Test: {test_acc:.4f}")
print(json.dumps(counts))
