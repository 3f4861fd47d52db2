#!/usr/bin/python3
"""The PyTorch peer of Runnel's text_cnn app: the same fortunes, split, vocabulary, model and
optimizer, so held-out accuracy and step time compare directly.

  text_cnn_torch.py [--epochs 5] [--threads 2]

Prints the held-out accuracy after each epoch, the median training step time, and
`bench text_cnn_torch_step: <ms>`.
"""
import argparse
import os
import statistics
import time

from text_common import tokenize


def read_fortunes(directory, min_count):
    data, names = [], []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or not os.path.isfile(path):
            continue
        mine, text = [], []
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.rstrip("\n") == "%":
                    words = tokenize("".join(text))
                    if words:
                        mine.append(words)
                    text = []
                else:
                    text.append(line)
        words = tokenize("".join(text))
        if words:
            mine.append(words)
        if len(mine) >= min_count:
            data += [(w, len(names)) for w in mine]
            names.append(name)
    return data, names


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fortunes", default="/usr/share/games/fortunes")
    p.add_argument("--min-per-category", type=int, default=200)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--filters", type=int, default=100)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.001)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    data, names = read_fortunes(a.fortunes, a.min_per_category)
    train = [d for i, d in enumerate(data) if i % 10 != 9]
    test = [d for i, d in enumerate(data) if i % 10 == 9]
    counts = {}
    for words, _ in train:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    vocab = sorted((w for w, c in counts.items() if c >= 2), key=lambda w: (-counts[w], w))
    ids = {w: i + 2 for i, w in enumerate(vocab)}

    def encode(items):
        x = torch.zeros(len(items), a.max_length, dtype=torch.long)
        for r, (words, _) in enumerate(items):
            for k, w in enumerate(words[: a.max_length]):
                x[r, k] = ids.get(w, 1)
        return x, torch.tensor([label for _, label in items])

    xtr, ytr = encode(train)
    xte, yte = encode(test)
    print(f"{len(data)} fortunes in {len(names)} categories ({len(test)} held out); "
          f"vocabulary {len(vocab)}")

    class Kim(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(len(vocab) + 2, a.dim)
            self.convs = nn.ModuleList(nn.Conv2d(1, a.filters, (w, a.dim)) for w in (3, 4, 5))
            self.out = nn.Linear(3 * a.filters, len(names))

        def forward(self, x):
            h = self.emb(x).unsqueeze(1)  # [b, 1, length, dim]
            pooled = [F.relu(c(h)).squeeze(3).max(dim=2).values for c in self.convs]
            return self.out(F.dropout(torch.cat(pooled, 1), 0.5, self.training))

    model = Kim()
    # The app's initialisation: embeddings U(-0.1, 0.1) (padding row zero), weights from a
    # normal truncated at 2 sigma with sigma 0.1, conv biases 0.1, output biases 0.
    with torch.no_grad():
        model.emb.weight.uniform_(-0.1, 0.1)
        model.emb.weight[0].zero_()
        for c in model.convs:
            nn.init.trunc_normal_(c.weight, std=0.1, a=-0.2, b=0.2)
            c.bias.fill_(0.1)
        nn.init.trunc_normal_(model.out.weight, std=0.1, a=-0.2, b=0.2)
        model.out.bias.zero_()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    times = []
    for epoch in range(a.epochs):
        model.train()
        order = torch.randperm(len(train))
        for b in range(0, len(train), a.batch):
            idx = order[b:b + a.batch]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch + 1}: held-out accuracy {acc:.4f}")
    ms = statistics.median(times) * 1e3
    print(f"median step {ms:.2f} ms ({a.threads} threads)")
    print(f"bench text_cnn_torch_step: {ms:.2f} ms")


if __name__ == "__main__":
    main()
