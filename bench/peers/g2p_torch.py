"""PyTorch peer of Runnel's g2p app (apps/train/g2p.cpp): the same dictionary, split and model.

Reads Debian's festlex-cmu dictionary with the app's rules (lower-case words of at most 20
letters, each word's first pronunciation, stress dropped; every 20th word held out) and trains the
app's default model: letter and phone embeddings of 64, a bidirectional LSTM of 128 per direction,
a decoder LSTM of 256 started from both directions' final states, Luong's general attention with
input feeding, a softmax over the phones; Glorot-uniform weights, zero biases with 1.0 on the
LSTMs' forget gates; Adam (lr 0.002), gradients clipped to global norm 5, 64 words per batch
bucketed by letter count (boundaries 5, 7, 9, 11, 14). Evaluates greedy decoding and beam search
(width 4, summed log-probabilities, finished hypotheses kept at no cost) on the held-out words.
Prints per epoch, then
  g2p_torch: beam WER W PER P greedy WER W PER P

  g2p_torch.py [--epochs 4] [--threads 2] [--test-words N] [--dict PATH]
"""
import argparse
import math
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--dict", default="/usr/share/festival/dicts/cmu/cmudict-0.4.out")
p.add_argument("--epochs", type=int, default=4)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--test-words", type=int, default=-1)
p.add_argument("--beam", type=int, default=4)
p.add_argument("--max-batches", type=int, default=-1, help="per epoch (a quick check)")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)

# ---- data, as apps/train/g2p/g2p_data.cpp reads it ----
entries, seen = [], set()
with open(a.dict) as f:
    for line in f:
        if not line.startswith("("):
            continue
        q1 = line.index('"')
        q2 = line.index('"', q1 + 1)
        word = line[q1 + 1 : q2]
        body = line[line.index("(((", q2) :]
        if not word or len(word) > 20 or not all(c.islower() or c == "'" for c in word) or word in seen:
            continue
        seen.add(word)
        phones = [t for t in body.replace("(", " ").replace(")", " ").split() if not t[0].isdigit()]
        entries.append((word, phones))
letters = sorted({c for w, _ in entries for c in w})
phones = ["<eos>", "<go>"] + sorted({ph for _, ps in entries for ph in ps})
letter_id = {c: i + 1 for i, c in enumerate(letters)}
phone_id = {ph: i for i, ph in enumerate(phones)}
train = [e for i, e in enumerate(entries) if i % 20 != 19]
test = [e for i, e in enumerate(entries) if i % 20 == 19]
if a.test_words > 0:
    test = test[: a.test_words]
L, P, E, U = len(letters) + 1, len(phones), 64, 128
bounds = [5, 7, 9, 11, 14]


def batches(items, size, shuffle):
    order = list(range(len(items)))
    if shuffle:
        rng.shuffle(order)
    buckets = [[] for _ in range(len(bounds) + 1)]
    for i in order:
        n = len(items[i][0])
        k = next((j for j, b in enumerate(bounds) if n < b), len(bounds))
        buckets[k].append(items[i])
        if len(buckets[k]) == size:
            yield buckets[k]
            buckets[k] = []
    for b in buckets:
        if b:
            yield b


def tensors(batch):
    S = max(len(w) for w, _ in batch)
    T = max(len(ps) for _, ps in batch) + 1
    src = torch.zeros(len(batch), S, dtype=torch.long)
    dec_in = torch.zeros(len(batch), T, dtype=torch.long)
    dec_out = torch.zeros(len(batch), T, dtype=torch.long)
    mask = torch.zeros(len(batch), T)
    for b, (w, ps) in enumerate(batch):
        src[b, : len(w)] = torch.tensor([letter_id[c] for c in w])
        ids = [phone_id[x] for x in ps]
        dec_in[b, : len(ids) + 1] = torch.tensor([1] + ids)
        dec_out[b, : len(ids)] = torch.tensor(ids)
        mask[b, : len(ids) + 1] = 1
    lengths = torch.tensor([len(w) for w, _ in batch])
    return src, lengths, dec_in, dec_out, mask


def glorot(rows, cols):
    lim = math.sqrt(6.0 / (rows + cols))
    return nn.Parameter(torch.empty(rows, cols).uniform_(-lim, lim))


class LSTM(nn.Module):
    """Runnel's lstm_cell: one [in + units, 4 units] Glorot kernel, gates i, j, f, o, forget bias 1."""

    def __init__(self, inp, units):
        super().__init__()
        self.units = units
        self.kernel = glorot(inp + units, 4 * units)
        self.bias = nn.Parameter(torch.zeros(4 * units))

    def forward(self, x, state):
        c, h = state
        i, j, f, o = (torch.cat([x, h], 1) @ self.kernel + self.bias).chunk(4, 1)
        c = c * torch.sigmoid(f + 1.0) + torch.sigmoid(i) * torch.tanh(j)
        h = torch.tanh(c) * torch.sigmoid(o)
        return c, h


class G2P(nn.Module):
    def __init__(self):
        super().__init__()
        self.letters, self.phones = glorot(L, E), glorot(P, E)
        # The encoder as one cuDNN-style bidirectional nn.LSTM over packed sequences, initialised
        # as Runnel's cells are: Glorot over [in + units, 4 units], forget bias 1.
        self.encoder = nn.LSTM(E, U, bidirectional=True, batch_first=True)
        lim = math.sqrt(6.0 / (E + U + 4 * U))
        with torch.no_grad():
            for name, w in self.encoder.named_parameters():
                if name.startswith("weight"):
                    w.uniform_(-lim, lim)
                else:
                    w.zero_()
                    if name.startswith("bias_ih"):
                        w[U : 2 * U] = 1.0  # PyTorch's gates are i, f, g, o
        self.dec = LSTM(E + 2 * U, 2 * U)
        self.memory_layer = glorot(2 * U, 2 * U)
        self.attention_layer = glorot(4 * U, 2 * U)
        self.out_w, self.out_b = glorot(2 * U, P), nn.Parameter(torch.zeros(P))

    def encode(self, src, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.letters[src], lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        keys = memory @ self.memory_layer
        bias = (torch.arange(src.shape[1])[None, :] >= lengths[:, None]).float() * -1e9
        return memory, keys, bias, (torch.cat([c[0], c[1]], 1), torch.cat([h[0], h[1]], 1))

    def step(self, token, state, memory, keys, bias):
        c, h, att = state
        c, h = self.dec(torch.cat([self.phones[token], att], 1), (c, h))
        align = torch.softmax(torch.bmm(keys, h[:, :, None])[:, :, 0] + bias, 1)
        context = torch.bmm(align[:, None, :], memory)[:, 0]
        att = torch.tanh(torch.cat([h, context], 1) @ self.attention_layer)
        return att @ self.out_w + self.out_b, (c, h, att)


model = G2P()
opt = torch.optim.Adam(model.parameters(), lr=0.002)


def loss_of(batch):
    src, lengths, dec_in, dec_out, mask = tensors(batch)
    memory, keys, bias, (c, h) = model.encode(src, lengths)
    state = (c, h, c.new_zeros(c.shape))
    total = 0
    for t in range(dec_in.shape[1]):
        logits, state = model.step(dec_in[:, t], state, memory, keys, bias)
        total = total + (F.cross_entropy(logits, dec_out[:, t], reduction="none") * mask[:, t]).sum()
    return total / mask.sum()


def edit(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[-1]


def decode(batch, width):
    src, lengths, _, _, _ = tensors(batch)
    memory, keys, bias, (c, h) = model.encode(src, lengths)
    B, limit = len(batch), 2 * int(lengths.max()) + 4
    rows = torch.arange(B).repeat_interleave(width)
    memory, keys, bias, c, h = memory[rows], keys[rows], bias[rows], c[rows], h[rows]
    state = (c, h, c.new_zeros(c.shape))
    token = torch.ones(B * width, dtype=torch.long)
    done = torch.zeros(B * width, dtype=torch.bool)
    scores = torch.tensor([0.0] + [-1e9] * (width - 1)).repeat(B)
    seqs = torch.zeros(B * width, 0, dtype=torch.long)
    eos_only = torch.full((1, P), -1e9)
    eos_only[0, 0] = 0
    for _ in range(limit):
        if bool(done.all()):
            break
        logits, state = model.step(token, state, memory, keys, bias)
        fin = done.float()[:, None]
        logp = F.log_softmax(logits, 1) * (1 - fin) + eos_only * fin
        best, index = (scores[:, None] + logp).reshape(B, width * P).topk(width, 1)
        parent = (torch.arange(B)[:, None] * width + index // P).reshape(-1)
        token = (index % P).reshape(-1)
        state = tuple(s[parent] for s in state)
        done = done[parent] | (token == 0)
        seqs = torch.cat([seqs[parent], token[:, None]], 1)
        scores = best.reshape(-1)
    out = []
    for b in range(B):
        ids = seqs[b * width].tolist()
        out.append(ids[: ids.index(0)] if 0 in ids else ids)
    return out


def evaluate():
    model.eval()
    res = {}
    with torch.no_grad():
        for name, width in (("beam", a.beam), ("greedy", 1)):
            wrong = errors = words = total = 0
            for batch in batches(test, 256, False):
                for (w, ps), got in zip(batch, decode(batch, width)):
                    ref = [phone_id[x] for x in ps]
                    d = edit(got, ref)
                    words, total, errors, wrong = words + 1, total + len(ref), errors + d, wrong + (d > 0)
            res[name] = (100.0 * wrong / words, 100.0 * errors / total)
    model.train()
    return res


print(f"g2p_torch: {len(train)} words to train on, {len(test)} held out; {len(letters)} letters, {P - 2} phones", flush=True)
for epoch in range(a.epochs):
    start, losses, words = time.time(), [], 0
    for n, batch in enumerate(batches(train, 64, True)):
        if n == a.max_batches:
            break
        loss = loss_of(batch)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        losses.append(float(loss))
        words += len(batch)
    seconds = time.time() - start
    r = evaluate()
    print(f"epoch {epoch + 1}: loss {sum(losses) / len(losses):.4f}; held-out WER {r['beam'][0]:.2f}% PER "
          f"{r['beam'][1]:.2f}% (beam {a.beam}), WER {r['greedy'][0]:.2f}% PER {r['greedy'][1]:.2f}% (greedy) "
          f"({seconds:.0f} s, {words / seconds:.0f} words/s)", flush=True)
print(f"g2p_torch: beam WER {r['beam'][0]:.2f} PER {r['beam'][1]:.2f} greedy WER {r['greedy'][0]:.2f} PER {r['greedy'][1]:.2f}")
