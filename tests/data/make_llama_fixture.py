#!/usr/bin/env python3
"""make_llama_fixture: writes tests/data/llama-tiny-hf/, a tiny Llama as transformers'
save_pretrained(max_shard_size="8KB") writes it: config.json, model.safetensors.index.json and
two BF16 shards, with a generation_config.json and a tokenizer_config.json to be copied.

Plain Python (no numpy, torch or safetensors needed): the safetensors format is an 8-byte
little-endian header length, a JSON header ("__metadata__" first, then each tensor's dtype,
shape and data_offsets, padded with spaces to 8 bytes) and the data. Shards are cut as
huggingface_hub cuts them (tensors in the model's state_dict order, a new shard when the next
tensor would pass the limit); in a shard the tensors are sorted by name, as the safetensors
library writes them.

Every value is exact in BF16 so tests can recompute it: element i of tensor `name` is
((sum of name's bytes + 11 i) mod 255 - 127) / 64 (tests/test_hf_folder.c, fixture_value).

Usage: python3 tests/data/make_llama_fixture.py [OUT_DIR]   (default: beside this script)
"""
import json
import os
import struct
import sys

LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB, MAX_POS = 2, 16, 4, 2, 32, 64, 64
MAX_SHARD_BYTES = 8000  # max_shard_size="8KB": transformers counts 10^3 bytes a KB


def state_dict_shapes():
    """LlamaForCausalLM's parameters in state_dict order, with their shapes."""
    head_dim = HIDDEN // HEADS
    kv = KV_HEADS * head_dim
    out = [("model.embed_tokens.weight", [VOCAB, HIDDEN])]
    for b in range(LAYERS):
        p = "model.layers.%d." % b
        out += [(p + "self_attn.q_proj.weight", [HIDDEN, HIDDEN]),
                (p + "self_attn.k_proj.weight", [kv, HIDDEN]),
                (p + "self_attn.v_proj.weight", [kv, HIDDEN]),
                (p + "self_attn.o_proj.weight", [HIDDEN, HIDDEN]),
                (p + "mlp.gate_proj.weight", [FFN, HIDDEN]),
                (p + "mlp.up_proj.weight", [FFN, HIDDEN]),
                (p + "mlp.down_proj.weight", [HIDDEN, FFN]),
                (p + "input_layernorm.weight", [HIDDEN]),
                (p + "post_attention_layernorm.weight", [HIDDEN])]
    out += [("model.norm.weight", [HIDDEN]), ("lm_head.weight", [VOCAB, HIDDEN])]
    return out


def value(name, i):
    return ((sum(name.encode()) + 11 * i) % 255 - 127) / 64.0


def bf16(x):
    """x as BF16 bits: fp32's upper half (every value here is exact, so no rounding)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    assert bits & 0xFFFF == 0, x
    return bits >> 16


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_safetensors(path, tensors):
    header, data, at = {"__metadata__": {"format": "pt"}}, bytearray(), 0
    for name, shape in sorted(tensors):
        n = numel(shape)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + 2 * n]}
        data += struct.pack("<%dH" % n, *(bf16(value(name, i)) for i in range(n)))
        at += 2 * n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def shards(tensors):
    out, cur, size = [], [], 0
    for name, shape in tensors:
        b = 2 * numel(shape)
        if cur and size + b > MAX_SHARD_BYTES:
            out.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += b
    return out + [cur]


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                             "llama-tiny-hf")
    os.makedirs(out, exist_ok=True)
    tensors = state_dict_shapes()
    parts = shards(tensors)
    weight_map = {}
    for k, part in enumerate(parts):
        name = "model-%05d-of-%05d.safetensors" % (k + 1, len(parts))
        write_safetensors(os.path.join(out, name), part)
        weight_map.update({t: name for t, _ in part})
    total = sum(2 * numel(s) for _, s in tensors)
    write_json(os.path.join(out, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})
    write_json(os.path.join(out, "config.json"), {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": HIDDEN // HEADS,
        "hidden_act": "silu", "hidden_size": HIDDEN, "initializer_range": 0.02,
        "intermediate_size": FFN, "max_position_embeddings": MAX_POS, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.46.0", "use_cache": True,
        "vocab_size": VOCAB})
    write_json(os.path.join(out, "generation_config.json"), {
        "_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2,
        "transformers_version": "4.46.0"})
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "bos_token": "<s>", "eos_token": "</s>", "model_max_length": MAX_POS,
        "tokenizer_class": "PreTrainedTokenizerFast"})


if __name__ == "__main__":
    main()
