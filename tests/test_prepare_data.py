#!/usr/bin/env python3
"""Test of tools/prepare_data.py (meson test 'prepare_data'): a tiny word-level tokenizer made
here, inputs of every kind, and the files the tool writes read back with a reader of this file's
own: the tokens exact (the post-processor's BOS, an EOS after each document), the prompt's
tokens masked, uint16 and llm.c version 1 for a small vocabulary, uint32 and llm.c's Llama 3
header above 65536, the held-out split, a stale mask removed, one-line errors naming the file
and line; then fuyou-run trains and evaluates on what it wrote (FUYOU_RUN). Chat messages are
checked where transformers is importable. Exits 77 (skip) where `tokenizers` is not."""

import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import tokenizers
    from tokenizers import models, pre_tokenizers, processors
except ImportError:
    print("SKIP: the Python package `tokenizers` is not installed (pip install tokenizers)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.environ.get("PREPARE_DATA", os.path.join(HERE, "..", "tools", "prepare_data.py"))
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}")


def make_tokenizer(folder, words):
    """A WordLevel tokenizer of [UNK] <eos> <bos> and words, BOS added to every sequence."""
    vocab = {"[UNK]": 0, "<eos>": 1, "<bos>": 2}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[UNK]", "<eos>", "<bos>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", 2)])
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<eos>", "bos_token": "<bos>"}, f)
    return vocab


def read_npy(path):
    """(descr, values) of a 1-D .npy file, read here without numpy."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"\x93NUMPY\x01\x00", path
    n = struct.unpack("<H", raw[8:10])[0]
    header = raw[10:10 + n].decode()
    assert (10 + n) % 64 == 0 and header.endswith("\n"), header
    d = eval(header)  # the header is a Python literal
    assert d["fortran_order"] is False and len(d["shape"]) == 1
    code = {"<u2": "H", "<u4": "I", "|u1": "B"}[d["descr"]]
    body = raw[10 + n:]
    values = list(struct.unpack("<%d%s" % (d["shape"][0], code), body))
    return d["descr"], values


def read_llmc(path):
    with open(path, "rb") as f:
        raw = f.read()
    magic, version, count = struct.unpack("<3i", raw[:12])
    width = 2 if version == 1 else 4
    assert len(raw) == 1024 + width * count, path
    return magic, version, list(struct.unpack("<%d%s" % (count, "H" if width == 2 else "I"),
                                              raw[1024:]))


def tool(*args):
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    tmp = tempfile.mkdtemp(prefix="fuyou-prep-")
    words = "the cat sat a b q1 q2 c1 c2 on mat".split()
    vocab = make_tokenizer(f"{tmp}/tok", words)
    ids = {w: vocab[w] for w in words}
    write(f"{tmp}/doc.txt", "the cat sat")
    write(f"{tmp}/mix.jsonl", json.dumps({"text": "a b"}) + "\n\n" +
          json.dumps({"prompt": "q1 q2", "completion": "c1 c2"}) + "\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/o.npy", f"{tmp}/doc.txt",
                   f"{tmp}/mix.jsonl")
    check(rc == 0, f"the tool runs: {out}")
    bos, eos = 2, 1
    want = [bos, ids["the"], ids["cat"], ids["sat"], eos, bos, ids["a"], ids["b"], eos,
            bos, ids["q1"], ids["q2"], ids["c1"], ids["c2"], eos]
    want_mask = [1] * 9 + [0, 0, 0, 1, 1, 1]
    descr, toks = read_npy(f"{tmp}/o.npy")
    check(descr == "<u2" and toks == want, f"tokens {descr} {toks}, want {want}")
    descr, mask = read_npy(f"{tmp}/o.mask.npy")
    check(descr == "|u1" and mask == want_mask, f"mask {mask}, want {want_mask}")
    check("3 documents, 15 tokens (uint16" in out and "3 masked" in out, out)
    check(f"fine-tune with: fuyou-run --model {tmp}/tok --data {tmp}/o.npy" in out, out)
    # an --out folder that does not exist is made (the README's data/train.npy)
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/new/dir/o.npy", f"{tmp}/doc.txt")
    check(rc == 0 and read_npy(f"{tmp}/new/dir/o.npy")[1] == want[:5], f"a new folder: {out}")
    write(f"{tmp}/file", "")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/file/o.npy", f"{tmp}/doc.txt")
    check(rc == 2 and f"--out {tmp}/file/o.npy: cannot create {tmp}/file" in out and
          out.count("\n") == 1, f"an --out folder that cannot be: {out}")
    # llm.c's format, version 1, and its raw mask
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/o.bin", f"{tmp}/doc.txt",
                   f"{tmp}/mix.jsonl")
    magic, version, toks = read_llmc(f"{tmp}/o.bin")
    check(rc == 0 and (magic, version) == (20240520, 1) and toks == want, f"llm.c {magic} "
          f"{version} {toks}")
    with open(f"{tmp}/o.bin.mask", "rb") as f:
        check(list(f.read()) == want_mask, "the .bin's mask")
    # nothing masked: an old mask is removed
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/o.npy", f"{tmp}/doc.txt")
    check(rc == 0 and not os.path.exists(f"{tmp}/o.mask.npy"), "a stale mask is removed")
    # the held-out split: every document in one of the two files, each file non-empty
    lines = [json.dumps({"text": " ".join(words[i % len(words)] for i in range(k, k + 9))})
             for k in range(40)]
    write(f"{tmp}/many.jsonl", "\n".join(lines) + "\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/s.npy", "--val-fraction",
                   "0.25", "--seed", "3", f"{tmp}/many.jsonl")
    _, train = read_npy(f"{tmp}/s.npy")
    _, val = read_npy(f"{tmp}/s.val.npy")
    check(rc == 0 and train.count(eos) + val.count(eos) == 40 and 0 < val.count(eos) < 20,
          f"split {train.count(eos)} + {val.count(eos)}: {out}")
    rc2, _ = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/s2.npy", "--val-fraction",
                  "0.25", "--seed", "3", f"{tmp}/many.jsonl")
    check(rc2 == 0 and read_npy(f"{tmp}/s2.val.npy")[1] == val, "the split is seeded")
    # errors: one line naming the file and line, exit 2
    write(f"{tmp}/bad.jsonl", json.dumps({"text": "a"}) + "\n{not json\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/b.npy", f"{tmp}/bad.jsonl")
    check(rc == 2 and f"{tmp}/bad.jsonl:2: not JSON" in out and out.count("\n") == 1, out)
    write(f"{tmp}/odd.jsonl", json.dumps({"prompt": "a"}) + "\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/b.npy", f"{tmp}/odd.jsonl")
    check(rc == 2 and "odd.jsonl:1: \"prompt\" and \"completion\" are both strings" in out, out)
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/b.npy", "--eos", "<nope>",
                   f"{tmp}/doc.txt")
    check(rc == 2 and "'<nope>' is not in the tokenizer's vocabulary" in out, out)
    rc, out = tool("--tokenizer", f"{tmp}/none", "--out", f"{tmp}/b.npy", f"{tmp}/doc.txt")
    check(rc == 2 and "tokenizer.json: no such file" in out, out)
    # a vocabulary above 65536: uint32, and llm.c's Llama 3 header
    big = [f"w{i}" for i in range(70000)]
    bvocab = make_tokenizer(f"{tmp}/big", big)
    write(f"{tmp}/big.txt", "w0 w69999")
    rc, out = tool("--tokenizer", f"{tmp}/big", "--out", f"{tmp}/g.npy", f"{tmp}/big.txt")
    descr, toks = read_npy(f"{tmp}/g.npy")
    check(rc == 0 and descr == "<u4" and toks == [2, bvocab["w0"], bvocab["w69999"], 1],
          f"uint32 {descr} {toks}")
    rc, out = tool("--tokenizer", f"{tmp}/big", "--out", f"{tmp}/g.bin", f"{tmp}/big.txt")
    magic, version, toks = read_llmc(f"{tmp}/g.bin")
    check((magic, version) == (20240801, 7) and toks[2] == bvocab["w69999"], "llm.c uint32")
    chat_case(tmp)
    fuyou_run(tmp)
    subprocess.run(["rm", "-rf", tmp])
    print(f"{failures} failed" if failures else "prepare_data: all checks passed")
    return 1 if failures else 0


def chat_case(tmp):
    """Chat messages through a template: only the assistant's turns trained on."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("note: transformers is not installed; chat messages not checked")
        return
    with open(f"{tmp}/tok/tokenizer_config.json") as f:
        config = json.load(f)
    config["chat_template"] = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                               "<eos> {% endfor %}{% if add_generation_prompt %}assistant : "
                               "{% endif %}")
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    with open(f"{tmp}/tok/tokenizer_config.json", "w") as f:
        json.dump(config, f)
    make_tokenizer(f"{tmp}/tok", "the cat sat a b q1 q2 c1 c2 on mat user assistant :".split())
    with open(f"{tmp}/tok/tokenizer_config.json", "w") as f:
        json.dump(config, f)
    msgs = [{"role": "user", "content": "q1 q2"}, {"role": "assistant", "content": "c1 c2"},
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    write(f"{tmp}/chat.jsonl", json.dumps({"messages": msgs}) + "\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/c.npy", f"{tmp}/chat.jsonl")
    check(rc == 0, f"chat: {out}")
    if rc:
        return
    _, mask = read_npy(f"{tmp}/c.mask.npy")
    # user : q1 q2 <eos> assistant : c1 c2 <eos> user : a <eos> assistant : b <eos> + EOS
    want = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1]
    check(mask == want, f"chat mask {mask}, want {want}")


def fuyou_run(tmp):
    """fuyou-run trains on the tool's files, masked, and evaluates on the held-out one."""
    run = os.environ.get("FUYOU_RUN")
    if not run:
        print("note: FUYOU_RUN not set; the files are not trained on")
        return
    vocab = tokenizers.Tokenizer.from_file(f"{tmp}/tok/tokenizer.json").get_vocab_size(True)
    write(f"{tmp}/m.ini", f"[model]\nlayers = 1\nhidden = 16\nheads = 2\nvocab = {vocab}\n"
          "max_seq = 16\n")
    lines = [json.dumps({"prompt": "q1 q2 the", "completion": "cat sat on a mat"})] * 30
    write(f"{tmp}/pc.jsonl", "\n".join(lines) + "\n")
    rc, out = tool("--tokenizer", f"{tmp}/tok", "--out", f"{tmp}/t.npy", "--val-fraction",
                   "0.2", f"{tmp}/pc.jsonl")
    check(rc == 0, out)
    r = subprocess.run([run, "--model", f"{tmp}/m.ini", "--data", f"{tmp}/t.npy",
                        "--eval-data", f"{tmp}/t.val.npy", "--batch", "2", "--seq", "8",
                        "--steps", "3", "--threads", "1"], capture_output=True, text=True)
    check(r.returncode == 0 and "held-out loss" in r.stdout, f"fuyou-run: {r.stdout}"
          f"{r.stderr}")


if __name__ == "__main__":
    sys.exit(main())
