"""What the text peers share with Runnel's apps (apps/train/text/corpus.cpp)."""


def tokenize(text):
    """apps/train/text/corpus.cpp's tokenize: lower-cased runs of ASCII letters, inner apostrophes kept."""
    out, w = [], []

    def flush():
        while w and w[-1] == "'":
            w.pop()
        if w:
            out.append("".join(w))
        w.clear()

    for ch in text:
        if ch.isascii() and ch.isalpha():
            w.append(ch.lower())
        elif ch == "'" and w:
            w.append("'")
        else:
            flush()
    flush()
    return out
