#!/usr/bin/env python3
"""hf_roundtrip: a Hugging Face Llama folder through fuyou-run and back into transformers.

    tools/hf_roundtrip.py --fuyou-run build/exec/fuyou-run --work DIR [--backend cuda]
        [--offload] [--steps N]

1. transformers makes a random-weight Llama (grouped-query attention, Llama 3's RoPE scaling,
   an untied head) and save_pretrained writes it in several shards; random token files are
   written beside it as .npy (uint32): training data and one held-out batch.
2. fuyou-run (the fp32 cpu backend, lr 0) evaluates the folder as transformers saved it; the
   loss must equal transformers' own on the same batch.
3. fuyou-run fine-tunes the folder (--backend, --offload as given) and saves a checkpoint.
4. transformers loads the checkpoint (AutoModelForCausalLM.from_pretrained) and its loss on
   the held-out batch must equal fuyou-run's evaluation of the same checkpoint, and be lower
   than the random model's. Both comparisons are in fp32: the tolerance is 1e-4 relative.
Prints one line per check; exits 0 when all pass, 1 when one fails, 77 when torch or
transformers cannot be imported (a test suite's skip).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

TOLERANCE = 1e-4
BATCH, SEQ = 4, 64


def make_model(folder):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=128, intermediate_size=344, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=1000,
                      max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=500000.0,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 32},
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    model.save_pretrained(folder, max_shard_size="500KB", safe_serialization=True)
    return cfg.vocab_size


def write_tokens(path, tokens):
    import numpy as np
    np.save(path, np.asarray(tokens, dtype="<u4"))


def hf_loss(folder, eval_path):
    """Mean cross-entropy over the batch's B x T targets, as fuyou's loader cuts the file:
    sequences of T + 1 at stride T, in file order."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    tok = np.load(eval_path).astype("int64")
    seqs = torch.tensor(np.stack([tok[i * SEQ:i * SEQ + SEQ + 1] for i in range(BATCH)]))
    with torch.no_grad():
        logits = model(seqs[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 seqs[:, 1:].reshape(-1))
    return float(loss)


def fuyou_eval(args, folder, train, held_out):
    """fuyou-run's held-out loss of the weights in folder (cpu backend, fp32, lr 0), from its
    log's eval_loss column."""
    log = os.path.join(args.work, "eval-log.tsv")
    if os.path.exists(log):
        os.remove(log)
    run(args, ["--backend", "cpu", "--model", folder, "--init-from", folder, "--data", train,
               "--eval-data", held_out, "--eval-batches", "1", "--steps", "1", "--lr", "0",
               "--warmup", "0", "--log", log])
    with open(log) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    col = rows[0].index("eval_loss")
    return float(rows[-1][col])


def run(args, extra):
    cmd = [args.fuyou_run, "--batch", str(BATCH), "--seq", str(SEQ)] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit("fuyou-run failed (%d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                   (p.stdout + p.stderr)[-3000:]))
    return p.stdout + p.stderr


def check(name, got, want):
    rel = abs(got - want) / abs(want)
    ok = rel <= TOLERANCE
    print("%-52s fuyou %.6f  transformers %.6f  rel %.1e  %s" %
          (name, got, want, rel, "ok" if ok else "FAILED (tolerance %g)" % TOLERANCE))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuyou-run", required=True)
    ap.add_argument("--work", required=True, help="a directory for the folders and tokens")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--offload", action="store_true", help="fine-tune out of core")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    try:
        import numpy as np
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print("SKIP: %s" % e)
        return 77
    os.makedirs(args.work, exist_ok=True)
    init = os.path.join(args.work, "hf-init")
    vocab = make_model(init)
    shards = [f for f in os.listdir(init) if f.endswith(".safetensors")]
    print("transformers %s wrote %s in %d shards" % (transformers.__version__, init, len(shards)))
    rng = np.random.default_rng(1)
    # training text with structure to learn: a repeated random phrase, some noise
    phrase = rng.integers(0, vocab, 97)
    train_tok = np.concatenate([phrase if i % 4 else rng.integers(0, vocab, 97)
                                for i in range(200)])
    train = os.path.join(args.work, "train.npy")
    held_out = os.path.join(args.work, "eval.npy")
    write_tokens(train, train_tok)
    write_tokens(held_out, np.tile(phrase, 4)[:BATCH * SEQ + 1])
    ok = check("random folder as saved by transformers", fuyou_eval(args, init, train, held_out),
               hf_loss(init, held_out))
    save = os.path.join(args.work, "ckpt")
    extra = ["--backend", args.backend, "--model", init, "--init-from", init, "--data", train,
             "--steps", str(args.steps), "--lr", "3e-3", "--warmup", "3", "--save", save,
             "--overwrite"]
    if args.offload:
        extra += ["--offload", "--weights", "cpu", "--optim", "ssd", "--ssd-dir",
                  os.path.join(args.work, "ssd")]
        os.makedirs(os.path.join(args.work, "ssd"), exist_ok=True)
    out = run(args, extra)
    shutil.rmtree(os.path.join(args.work, "ssd"), ignore_errors=True)
    print([l for l in out.splitlines() if "steps 1.." in l][-1])
    with open(os.path.join(save, "latest")) as f:
        step_dir = os.path.join(save, f.read().strip())
    with open(os.path.join(step_dir, "config.json")) as f:
        arch = json.load(f)["architectures"]
    print("checkpoint %s: %s, files %s" % (step_dir, arch, sorted(os.listdir(step_dir))))
    tuned = fuyou_eval(args, step_dir, train, held_out)
    ok &= check("fine-tuned checkpoint loaded by transformers", tuned, hf_loss(step_dir, held_out))
    trained = tuned < hf_loss(init, held_out)
    print("fine-tuning lowered the held-out loss: %s" % ("yes" if trained else "NO"))
    return 0 if ok and trained else 1


if __name__ == "__main__":
    sys.exit(main())
