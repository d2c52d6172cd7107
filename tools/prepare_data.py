#!/usr/bin/env python3
"""prepare_data.py: tokenizes text for fuyou-run --data: a token file and its loss mask.

Usage:
  tools/prepare_data.py --tokenizer MODEL_DIR --out OUT.npy [--val-fraction F] [--seed N]
                        [--eos TOKEN] INPUT...

MODEL_DIR is a Hugging Face model folder with tokenizer.json (and tokenizer_config.json for the
EOS token and the chat template). Each INPUT is a document source:
  - a plain text file (not .jsonl / .json): one document, every token trained on;
  - JSON Lines (.jsonl, or .json holding one object per line), one document a line:
      {"text": ...}                     every token trained on;
      {"prompt": ..., "completion": ...}  the prompt's tokens masked out of the loss;
      {"messages": [{"role", "content"}, ...]}  rendered by the tokenizer's chat template
                                        (needs transformers), all but the assistant turns
                                        masked.
Every document is followed by the EOS token (trained on: it teaches the model to stop); a
document starts with what the tokenizer's post-processor adds (Llama's BOS, for one).

Output, by OUT's extension (data.h says what fuyou-run reads):
  - OUT.npy: a 1-D little-endian uint16 array ('<u2') when the vocabulary has at most 65536
    tokens, else uint32 ('<u4'); the mask, when any token is masked, is OUT.mask.npy ('|u1');
  - OUT.bin: llm.c's format, magic 20240520 version 1 with uint16 tokens up to 65536 tokens of
    vocabulary, else llm.c's Llama 3 header (magic 20240801, version 7, uint32 tokens); the mask
    is OUT.bin.mask, one raw byte a token.
A mask holds 1 for a token whose prediction is trained on and 0 for one left out. An old mask
beside OUT is removed when this run masks nothing, so that fuyou-run does not read a stale one.
--val-fraction F puts about F of the documents (each drawn with probability F from a generator
seeded by --seed; a draw of none is an error) into a held-out file, OUT with ".val" before its
extension, for fuyou-run --eval-data.

Tokenizing needs the `tokenizers` package (pip install tokenizers); chat messages also need
`transformers` for the template. Writing the files needs only the standard library.
Exit status: 0 done, 1 a runtime failure, 2 a usage or input error (one line naming the file and
line, and what to do).
"""

import argparse
import array
import json
import os
import random
import struct
import sys

LLMC_MAGIC, LLMC_MAGIC_U32 = 20240520, 20240801


class InputError(Exception):
    """An expected failure: one line for the user, exit status 2."""


def load_tokenizer(folder):
    """The tokenizers.Tokenizer of folder/tokenizer.json, and tokenizer_config.json (or {})."""
    try:
        import tokenizers  # noqa: F401 (imported here: the rest of the tool runs without it)
    except ImportError:
        raise InputError("the `tokenizers` package is not installed: pip install tokenizers")
    path = os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file; --tokenizer names a Hugging Face model folder "
                         "with tokenizer.json")
    tok = tokenizers.Tokenizer.from_file(path)
    config = {}
    cpath = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(cpath):
        with open(cpath, encoding="utf-8") as f:
            config = json.load(f)
    return tok, config


def token_text(value):
    """A special token as tokenizer_config.json gives it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value


def eos_id(tok, config, eos):
    """The EOS token's id: --eos, else tokenizer_config.json's eos_token."""
    name = eos or token_text(config.get("eos_token"))
    if not name:
        raise InputError("the tokenizer names no eos_token (tokenizer_config.json); give "
                         "--eos TOKEN, the token that ends a document")
    tid = tok.token_to_id(name)
    if tid is None:
        raise InputError(f"EOS token {name!r} is not in the tokenizer's vocabulary; give "
                         "--eos with one that is")
    return tid


class Chat:
    """The chat template of transformers' tokenizer for folder, loaded on first use."""

    def __init__(self, folder):
        self.folder, self.tok = folder, None

    def render(self, messages, where):
        """The conversation's text and the character spans of its assistant turns."""
        if self.tok is None:
            try:
                import transformers
            except ImportError:
                raise InputError(f"{where}: chat messages need the tokenizer's chat template, "
                                 "which needs transformers: pip install transformers")
            self.tok = transformers.AutoTokenizer.from_pretrained(self.folder)
            if not getattr(self.tok, "chat_template", None):
                raise InputError(f"{where}: the tokenizer in {self.folder} has no chat "
                                 "template; write prompt/completion pairs instead")

        def text(msgs, gen=False):
            return self.tok.apply_chat_template(msgs, tokenize=False,
                                                add_generation_prompt=gen)
        full = text(messages)
        spans = []
        for k, m in enumerate(messages):
            if m.get("role") != "assistant":
                continue
            # the turn is what the conversation up to it adds after the generation prompt
            start, end = len(text(messages[:k], gen=True)), len(text(messages[:k + 1]))
            if not (full.startswith(text(messages[:k + 1])) and start <= end):
                raise InputError(f"{where}: the chat template does not render a conversation "
                                 "as the prefixes of its turns; write prompt/completion pairs")
            spans.append((start, end))
        return full, spans


def encode(tok, text, special):
    return tok.encode(text, add_special_tokens=special)


def document(tok, chat, record, where):
    """One document's tokens and mask (lists) from a JSON Lines record."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: a line is a JSON object with \"text\", \"prompt\" and "
                         "\"completion\", or \"messages\"")
    if "messages" in record:
        msgs = record["messages"]
        if not isinstance(msgs, list) or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and
                isinstance(m.get("content"), str) for m in msgs):
            raise InputError(f"{where}: \"messages\" is a list of {{\"role\", \"content\"}} "
                             "strings")
        full, spans = chat.render(msgs, where)
        enc = encode(tok, full, False)
        mask = [int(any(s <= a and b <= e for s, e in spans) and b > a)
                for a, b in enc.offsets]
        return list(enc.ids), mask
    if "prompt" in record or "completion" in record:
        p, c = record.get("prompt"), record.get("completion")
        if not isinstance(p, str) or not isinstance(c, str):
            raise InputError(f"{where}: \"prompt\" and \"completion\" are both strings")
        prompt, completion = encode(tok, p, True).ids, encode(tok, c, False).ids
        return list(prompt) + list(completion), [0] * len(prompt) + [1] * len(completion)
    if isinstance(record.get("text"), str):
        ids = encode(tok, record["text"], True).ids
        return list(ids), [1] * len(ids)
    raise InputError(f"{where}: no \"text\", \"prompt\"/\"completion\" or \"messages\" string")


def documents(tok, chat, path):
    """The documents of one input file: (tokens, mask, where) each."""
    if not path.endswith((".jsonl", ".json")):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: cannot read it as UTF-8 text: {err}")
        ids = encode(tok, text, True).ids
        yield list(ids), [1] * len(ids), path
        return
    try:
        f = open(path, encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}")
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{where}: not JSON ({err.msg}); a .jsonl file holds one "
                                 "object a line")
            ids, mask = document(tok, chat, record, where)
            yield ids, mask, where


class Output:
    """One token file being filled: its tokens and mask, compactly."""

    def __init__(self, path, vocab):
        self.path, self.vocab = path, vocab
        self.wide = vocab > 65536
        self.tokens = array.array("I" if self.wide else "H")
        self.mask = array.array("B")
        self.docs = 0

    def add(self, ids, mask):
        self.tokens.extend(ids)
        self.mask.extend(mask)
        self.docs += 1

    def write(self):
        """The token file and the mask (or no mask: an old one removed)."""
        toks = self.tokens
        if toks.itemsize != (4 if self.wide else 2):
            raise RuntimeError("this Python's array item sizes are not 2 and 4 bytes")
        if sys.byteorder != "little":
            toks = array.array(toks.typecode, toks)
            toks.byteswap()
        npy = self.path.endswith(".npy")
        with open(self.path, "wb") as f:
            if npy:
                f.write(npy_header("<u4" if self.wide else "<u2", len(toks)))
            else:
                if len(toks) >= 2 ** 31:
                    raise InputError(f"{self.path}: {len(toks)} tokens, beyond the 2^31 - 1 "
                                     "of llm.c's header; write .npy, or split the inputs")
                magic, version = (LLMC_MAGIC_U32, 7) if self.wide else (LLMC_MAGIC, 1)
                f.write(struct.pack("<256i", magic, version, len(toks), *([0] * 253)))
            f.write(toks.tobytes())
        mpath = mask_path(self.path)
        if all(self.mask):
            if os.path.exists(mpath):
                os.remove(mpath)
            return None
        with open(mpath, "wb") as f:
            if npy:
                f.write(npy_header("|u1", len(self.mask)))
            f.write(self.mask.tobytes())
        return mpath


def npy_header(descr, n):
    """A .npy version 1.0 header for a 1-D C-order array, padded to 64 bytes as numpy does."""
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, n)
    d += " " * (-(10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1")


def mask_path(path):
    """The mask beside a token file, as fuyou-run looks for it (data.h)."""
    return path[:-4] + ".mask.npy" if path.endswith(".npy") else path + ".mask"


def val_path(path):
    stem, ext = os.path.splitext(path)
    return stem + ".val" + ext


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Tokenizes text for fuyou-run --data (a token "
                                 "file and its loss mask).")
    ap.add_argument("--tokenizer", required=True, metavar="DIR",
                    help="a Hugging Face model folder with tokenizer.json")
    ap.add_argument("--out", required=True, metavar="OUT.npy|OUT.bin",
                    help="the token file: .npy, or .bin for llm.c's format")
    ap.add_argument("--val-fraction", type=float, default=0.0, metavar="F",
                    help="the share of documents held out in OUT.val.EXT (default 0)")
    ap.add_argument("--seed", type=int, default=1337, help="the held-out draw (default 1337)")
    ap.add_argument("--eos", metavar="TOKEN", help="the token ending each document (default: "
                    "tokenizer_config.json's eos_token)")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="text files, or JSON Lines of text, prompt/completion or messages")
    a = ap.parse_args(argv)
    if not a.out.endswith((".npy", ".bin")):
        ap.error(f"--out {a.out}: name a .npy or a .bin file")
    if not 0 <= a.val_fraction < 1:
        ap.error(f"--val-fraction {a.val_fraction}: a fraction from 0 to below 1")
    return a


def make_out_folder(path):
    """Creates OUT's folder (and its parents) before any tokenizing, so that a path that cannot
    be written fails at once, not after the whole corpus."""
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise InputError(f"--out {path}: cannot create {folder}: {err.strerror}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"--out {path}: {folder} is not writable")


def run(a):
    make_out_folder(a.out)
    tok, config = load_tokenizer(a.tokenizer)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    eos = eos_id(tok, config, a.eos)
    chat = Chat(a.tokenizer)
    train = Output(a.out, vocab)
    val = Output(val_path(a.out), vocab) if a.val_fraction > 0 else None
    draw = random.Random(a.seed)
    for path in a.inputs:
        for ids, mask, where in documents(tok, chat, path):
            if not ids:
                continue
            out = val if val and draw.random() < a.val_fraction else train
            out.add(ids + [eos], mask + [1])
    if val and not val.docs:
        raise InputError(f"--val-fraction {a.val_fraction} drew no document of {train.docs}; "
                         "raise it, or give more documents")
    for out in (train, val):
        if out is None:
            continue
        if not out.docs:
            raise InputError(f"{out.path}: no document to write (the inputs are empty)")
        mpath = out.write()
        masked = len(out.mask) - sum(out.mask)
        print(f"{out.path}: {out.docs} documents, {len(out.tokens)} tokens "
              f"({'uint32' if out.wide else 'uint16'}, vocabulary {vocab})" +
              (f", {masked} masked in {mpath}" if mpath else ", none masked"))
    cmd = f"fuyou-run --model {a.tokenizer} --data {a.out}"
    if val:
        cmd += f" --eval-data {val.path}"
    print(f"fine-tune with: {cmd}\n  (--model loads the folder's weights; --init-from PATH "
          f"starts from other weights of that model, --from-scratch from random ones; any "
          f"--model needs a vocabulary of at least {vocab})")


def main(argv):
    a = parse_args(argv)
    try:
        run(a)
    except InputError as err:
        print(f"prepare_data.py: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
