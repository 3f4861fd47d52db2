#!/usr/bin/python3
"""The gensim peer of Runnel's word2vec app, on the same books, tokenized the same way.

  word2vec_gensim.py --runnel-vectors runnel-word2vec/vectors.txt [--epochs 5] [--workers 2]

Trains gensim's skip-gram twice (two seeds) and prints:
  - gensim's training throughput (corpus words per second, as Runnel's progress line counts);
  - the Spearman correlation, over 1,000 pairs of frequent words, between the cosine
    similarities of the two gensim runs, and between Runnel's and the first gensim run's;
  - `bench word2vec_quality: <ratio>` = runnel-vs-gensim / gensim-vs-gensim (target >= 0.8).
"""
import argparse
import random
import sys
import time

from text_common import tokenize

DEFAULT_BOOKS = [
    "/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt",
    "/usr/share/gocode/src/github.com/jdkato/prose/testdata/sherlock.txt",
]


def spearman(a, b):
    from scipy.stats import spearmanr
    return spearmanr(a, b).correlation


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default=",".join(DEFAULT_BOOKS))
    p.add_argument("--runnel-vectors")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--negative", type=int, default=5)
    p.add_argument("--pairs", type=int, default=1000)
    p.add_argument("--top", type=int, default=500, help="pairs are drawn among the N most frequent words")
    a = p.parse_args()

    from gensim.models import KeyedVectors, Word2Vec

    words = []
    for f in a.corpus.split(","):
        with open(f, encoding="utf-8", errors="replace") as fh:
            words += tokenize(fh.read())
    sentences = [words[i:i + 1000] for i in range(0, len(words), 1000)]
    models = []
    for seed in (1, 2):
        m = Word2Vec(vector_size=a.dim, window=a.window, min_count=a.min_count, sg=1,
                     negative=a.negative, sample=1e-3, workers=a.workers, seed=seed)
        m.build_vocab(sentences)
        t0 = time.time()
        m.train(sentences, total_examples=len(sentences), epochs=a.epochs)
        secs = time.time() - t0
        rate = len(words) * a.epochs / secs
        print(f"gensim seed {seed}: {a.epochs} epochs in {secs:.1f} s, {rate:.0f} words/s "
              f"({a.workers} workers)")
        models.append(m.wv)
    print(f"bench word2vec_gensim_throughput: {rate:.0f} words/s")

    vocab = models[0].index_to_key[:a.top]
    rng = random.Random(7)
    pairs = set()
    while len(pairs) < a.pairs:
        x, y = rng.sample(vocab, 2)
        pairs.add((min(x, y), max(x, y)))
    pairs = sorted(pairs)
    sims = [[m.similarity(x, y) for x, y in pairs] for m in models]
    base = spearman(sims[0], sims[1])
    print(f"gensim vs gensim (seeds 1, 2): Spearman {base:.3f} over {len(pairs)} pairs of the "
          f"{a.top} most frequent words")
    if a.runnel_vectors:
        r = KeyedVectors.load_word2vec_format(a.runnel_vectors, binary=False)
        missing = [w for x, y in pairs for w in (x, y) if w not in r.key_to_index]
        if missing:
            sys.exit(f"Runnel's vectors lack {len(missing)} of the words, e.g. {missing[:5]}")
        ours = [r.similarity(x, y) for x, y in pairs]
        corr = spearman(ours, sims[0])
        print(f"runnel vs gensim: Spearman {corr:.3f}")
        print(f"bench word2vec_quality: {corr / base:.2f} (runnel-vs-gensim / gensim-vs-gensim; "
              f"target >= 0.8)")


if __name__ == "__main__":
    main()
