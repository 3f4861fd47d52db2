# Peer for bench `lstm_lm_step`: a 2-layer LSTM language model in PyTorch (nn.LSTM), the shapes
# of bench/sequence_bench.cpp's: vocabulary 10,000, embedding and hidden 512, batch 32, 35 time
# steps, full softmax, SGD; weights Glorot-uniform and biases zero, as Runnel's lstm_cell.
#   lstm_lm_torch.py [THREADS [STEPS]]   prints "lstm_lm_torch_step: <median ms>"
import sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
torch.set_num_threads(threads)
torch.manual_seed(1)
vocab, hidden, batch, time_steps, layers = 10000, 512, 32, 35, 2
emb = nn.Embedding(vocab, hidden)
lstm = nn.LSTM(hidden, hidden, layers)
proj = nn.Linear(hidden, vocab)
params = list(emb.parameters()) + list(lstm.parameters()) + list(proj.parameters())
with torch.no_grad():
    for p in params:
        if p.dim() == 2:
            nn.init.xavier_uniform_(p)
        else:
            p.zero_()
opt = torch.optim.SGD(params, lr=0.1)
ids = torch.randint(vocab, (time_steps, batch))
targets = torch.randint(vocab, (time_steps * batch,))
state = (torch.zeros(layers, batch, hidden), torch.zeros(layers, batch, hidden))


def step():
    opt.zero_grad()
    out, _ = lstm(emb(ids), state)
    loss = F.cross_entropy(proj(out.reshape(time_steps * batch, hidden)), targets)
    loss.backward()
    opt.step()
    return loss.item()


for _ in range(3):
    step()
times = []
for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append((time.perf_counter() - start) * 1e3)
times.sort()
print(f"lstm_lm_torch_step: {times[len(times) // 2]:.2f}")
