"""PyTorch peer of Runnel's lm app (apps/train/lm.cpp): the same sentences, vocabulary and model.

Reads the split the app wrote (RECORDS_DIR/{train,valid,test}-*.ids: a sentence of word ids per
line; 0 is <eos>, 1 <unk>) and trains, as the app does by default: embeddings and softmax weights
uniform(-0.1, 0.1), one LSTM of width 200 (its input and recurrent weights one Glorot-uniform
kernel, as Runnel's lstm_cell, biases zero with 1.0 added to the forget gate), dropout 0.5 on the
LSTM's input and output, sampled softmax (512 log-uniform classes drawn without repeats, logits
corrected by the log expected count, accidental hits removed) in training and the full softmax for
perplexity, Adam (lr 0.002) with gradients clipped to global norm 5, batches of 64 sentences of
similar lengths (the app's bucket boundaries). Prints the perplexities after each epoch, then
  lm_torch: valid perplexity V test perplexity T

  lm_torch.py RECORDS_DIR [--epochs 6] [--threads 2] [--seed 1]
"""
import argparse
import glob
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("records_dir")
p.add_argument("--epochs", type=int, default=6)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--vocab", type=int, default=10000)
p.add_argument("--dim", type=int, default=200)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--num-sampled", type=int, default=512)
p.add_argument("--lr", type=float, default=0.002)
p.add_argument("--clip", type=float, default=5.0)
p.add_argument("--keep-prob", type=float, default=0.5)
p.add_argument("--boundaries", default="8,12,16,20,25,32,40")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)


def read(split):
    files = glob.glob(os.path.join(a.records_dir, split + "-*.ids"))
    if len(files) != 1:
        raise SystemExit(f"lm_torch: need exactly one {split}-*.ids in {a.records_dir} (run the lm app first)")
    with open(files[0]) as f:
        return [[int(x) for x in line.split()] for line in f]


train, valid, test = read("train"), read("valid"), read("test")
V, D = a.vocab, a.dim
bounds = [int(x) for x in a.boundaries.split(",")]


def bucket_batches(sentences, batch, shuffle):
    """Batches of sentences of similar length (lengths counting <eos>), as bucket_by_length."""
    order = list(range(len(sentences)))
    if shuffle:
        rng.shuffle(order)
    buckets = [[] for _ in range(len(bounds) + 1)]
    for i in order:
        n = len(sentences[i]) + 1
        k = next((j for j, b in enumerate(bounds) if n < b), len(bounds))
        buckets[k].append(i)
        if len(buckets[k]) == batch:
            yield [sentences[j] for j in buckets[k]]
            buckets[k] = []
    for b in buckets:
        if b:
            yield [sentences[j] for j in b]


def tensors(batch):
    """Time-major inputs (<eos> then the words), targets (the words then <eos>), mask."""
    T = max(len(s) for s in batch) + 1
    x = torch.zeros(T, len(batch), dtype=torch.long)
    y = torch.zeros(T, len(batch), dtype=torch.long)
    m = torch.zeros(T, len(batch))
    for b, s in enumerate(batch):
        x[1 : len(s) + 1, b] = torch.tensor(s, dtype=torch.long)
        y[: len(s), b] = torch.tensor(s, dtype=torch.long)
        m[: len(s) + 1, b] = 1
    return x, y, m


emb = nn.Embedding(V, D)
lstm = nn.LSTM(D, D)
softmax_w = nn.Parameter(torch.empty(V, D))
softmax_b = nn.Parameter(torch.zeros(V))
with torch.no_grad():
    emb.weight.uniform_(-0.1, 0.1)
    softmax_w.uniform_(-0.1, 0.1)
    limit = math.sqrt(6.0 / (2 * D + 4 * D))  # Glorot over the [in + units, 4 units] kernel
    lstm.weight_ih_l0.uniform_(-limit, limit)
    lstm.weight_hh_l0.uniform_(-limit, limit)
    lstm.bias_ih_l0.zero_()
    lstm.bias_hh_l0.zero_()
    lstm.bias_ih_l0[D : 2 * D] = 1.0  # PyTorch's gates are i, f, g, o
params = list(emb.parameters()) + list(lstm.parameters()) + [softmax_w, softmax_b]
opt = torch.optim.Adam(params, lr=a.lr)
drop = nn.Dropout(1 - a.keep_prob)
log_range = math.log(V + 1)


def log_uniform_unique(n):
    """n distinct classes from P(k) = log((k+2)/(k+1)) / log(V+1), and the number of draws."""
    seen, tries = {}, 0
    while len(seen) < n:
        draws = np.floor(np.exp(np.random.uniform(size=2 * n) * log_range)).astype(np.int64) - 1
        for d in draws:
            tries += 1
            if d not in seen:
                seen[d] = True
                if len(seen) == n:
                    break
    return torch.tensor(list(seen.keys())), tries


def log_expected(ids, tries):
    prob = torch.log((ids.double() + 2) / (ids.double() + 1)) / log_range
    return torch.log(-torch.expm1(tries * torch.log1p(-prob))).float()


def hidden(x):
    e = drop(emb(x)) if emb.training else emb(x)
    h, _ = lstm(e)
    return (drop(h) if emb.training else h).reshape(-1, D)


def perplexity(sentences):
    emb.eval()
    nll, count = 0.0, 0.0
    with torch.no_grad():
        for batch in bucket_batches(sentences, 64, False):
            x, y, m = tensors(batch)
            logits = hidden(x) @ softmax_w.t() + softmax_b
            loss = F.cross_entropy(logits, y.reshape(-1), reduction="none")
            nll += float((loss * m.reshape(-1)).sum())
            count += float(m.sum())
    emb.train()
    return math.exp(nll / count)


np.random.seed(a.seed)
for epoch in range(a.epochs):
    start, tokens, losses = time.time(), 0, []
    for batch in bucket_batches(train, a.batch, True):
        x, y, m = tensors(batch)
        h = hidden(x)
        labels, mask = y.reshape(-1), m.reshape(-1)
        sampled, tries = log_uniform_unique(a.num_sampled)
        true_logits = (h * softmax_w[labels]).sum(1) + softmax_b[labels] - log_expected(labels, tries)
        s_logits = h @ softmax_w[sampled].t() + softmax_b[sampled] - log_expected(sampled, tries)
        s_logits = s_logits.masked_fill(labels[:, None] == sampled[None, :], -1e30)
        logits = torch.cat([true_logits[:, None], s_logits], 1)
        loss_all = F.cross_entropy(logits, torch.zeros_like(labels), reduction="none")
        loss = (loss_all * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        losses.append(float(loss))
        tokens += int(mask.sum())
    seconds = time.time() - start
    v, t = perplexity(valid), perplexity(test)
    print(f"epoch {epoch + 1}: sampled loss {np.mean(losses):.3f}, valid perplexity {v:.1f}, "
          f"test perplexity {t:.1f} ({seconds:.1f} s, {tokens / seconds:.0f} tokens/s)", flush=True)
print(f"lm_torch: valid perplexity {v:.2f} test perplexity {t:.2f}")
