# Peer for bench `lstm_lm_step`: a 2-layer LSTM language model in PyTorch (nn.LSTM), the shapes
# of bench/sequence_bench.cpp's: vocabulary 10,000, embedding and hidden 512, batch 32, 35 time
# steps, full softmax, SGD; weights Glorot-uniform and biases zero, as Runnel's lstm_cell.
#   lstm_lm_torch.py [THREADS [STEPS [DEVICE]]]   prints "lstm_lm_torch_step: <median ms>"
# DEVICE cuda (bench/gpu_bench's gpu_lstm_lm_step): nn.LSTM on cuDNN, TF32 off as ours, and
# "lstm_lm_torch_peak_mib: <max_memory_allocated over the timed steps>".
import sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
device = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")
cuda = device.type == "cuda"
if cuda:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
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
for m in (emb, lstm, proj):
    m.to(device)
opt = torch.optim.SGD(params, lr=0.1)
ids = torch.randint(vocab, (time_steps, batch)).to(device)
targets = torch.randint(vocab, (time_steps * batch,)).to(device)
state = (torch.zeros(layers, batch, hidden, device=device),
         torch.zeros(layers, batch, hidden, device=device))


def step():
    opt.zero_grad()
    out, _ = lstm(emb(ids), state)
    loss = F.cross_entropy(proj(out.reshape(time_steps * batch, hidden)), targets)
    loss.backward()
    opt.step()
    # On the CPU the loss is read each step; on a GPU the step is waited for (ours runs to its
    # end too: a session waits for its GPUs before run returns).
    if cuda:
        torch.cuda.synchronize()
        return None
    return loss.item()


for _ in range(20 if cuda else 3):
    step()
if cuda:
    torch.cuda.reset_peak_memory_stats()
times = []
for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append((time.perf_counter() - start) * 1e3)
times.sort()
print(f"lstm_lm_torch_step: {times[len(times) // 2]:.3f}")
if cuda:
    print(f"lstm_lm_torch_peak_mib: {torch.cuda.max_memory_allocated() / 2**20:.2f}")
