#!/usr/bin/env python3
"""hf_real_size: a Hugging Face Llama folder at a real model's size, and transformers' loss on
the batches fuyou-run evaluates, for the fine-tuning check on a GPU machine
(tools/device_bench.sh finetune).

    tools/hf_real_size.py make --shape llama-3.1-8b --out DIR
        random weights in bf16 (on the GPU when there is one: seconds, not minutes), written
        by save_pretrained in 5 GB shards with their index, as a downloaded model is
    tools/hf_real_size.py loss --model DIR --tokens FILE --batch B --seq T --batches N
        transformers' mean cross-entropy over the first N batches of B sequences, cut as
        fuyou's loader cuts a token file (sequences of T + 1 tokens at stride T, in file
        order), the model loaded in its own dtype and run in fp32 on the GPU

The token file is headerless uint16 (nanoGPT's .bin). Prints one line; exits 77 when torch or
transformers cannot be imported.
"""
import argparse
import sys
import time

SHAPES = {
    # Llama 3.1 8B's config.json, weights aside
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=131072, rms_norm_eps=1e-5,
                         rope_theta=500000.0, tie_word_embeddings=False,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 8192},
                         bos_token_id=128000, eos_token_id=128001),
    # a small one of the same kind, to try the script on any machine
    "llama-tiny": dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                       max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                       tie_word_embeddings=False),
}


def make(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**SHAPES[a.shape])
    torch.manual_seed(a.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.time()
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    t1 = time.time()
    model.save_pretrained(a.out, max_shard_size="5GB", safe_serialization=True)
    t2 = time.time()
    n = sum(p.numel() for p in model.parameters())
    print("made %s: %d parameters, bf16, initialised in %.1f s on %s, written in %.1f s"
          % (a.out, n, t1 - t0, dev, t2 - t1))


def loss(a):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                                 device_map="cuda")
    model.eval()
    tok = np.fromfile(a.tokens, dtype="<u2").astype("int64")
    T, total, count = a.seq, 0.0, 0
    with torch.no_grad():
        for k in range(a.batches):
            seqs = [tok[(k * a.batch + i) * T:(k * a.batch + i) * T + T + 1]
                    for i in range(a.batch)]
            x = torch.tensor(np.stack(seqs), device="cuda")
            logits = model(x[:, :-1]).logits.float()
            ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                   x[:, 1:].reshape(-1), reduction="sum")
            total += float(ce)
            count += x[:, 1:].numel()
    print("transformers loss %.6f over %d targets of %s" % (total / count, count, a.model))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--shape", choices=sorted(SHAPES), default="llama-3.1-8b")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    lo = sub.add_parser("loss")
    lo.add_argument("--model", required=True)
    lo.add_argument("--tokens", required=True)
    lo.add_argument("--batch", type=int, required=True)
    lo.add_argument("--seq", type=int, required=True)
    lo.add_argument("--batches", type=int, required=True)
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print("SKIP: %s" % e)
        return 77
    make(a) if a.cmd == "make" else loss(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
