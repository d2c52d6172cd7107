#!/usr/bin/env bash
# fuzz_seeds.sh: writes the seed corpora of the fuzz targets (tests/fuzz/corpus/TARGET/) from
# real files: the hardware presets, the model inis, a checkpoint of the micro model
# (tests/fuzz/micro.ini) that fuyou-run trains and saves, small token and safetensors files
# made here, and a predicted trace and its dependencies from fuyou-sim. Run it when a format changes, then review and commit the corpus; the inputs of
# findings (regress-*, each with its test in the Check suites, and crash-*) are kept, the rest
# is replaced.
#
# Usage: tools/fuzz_seeds.sh [BUILD_DIR]   (a normal build with fuyou-run; default build)
# Exit status: 0 done, 1 a step failed, 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 1 ] || [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    echo "usage: tools/fuzz_seeds.sh [BUILD_DIR]" >&2
    exit 2
fi
build=${1:-build}
run=$build/exec/fuyou-run
if [ ! -x "$run" ]; then
    echo "fuzz_seeds.sh: $run not found; build first (meson compile -C $build)" >&2
    exit 2
fi
corpus=tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in hw model_ini hf_config safetensors tokens state trace plot; do
    mkdir -p "$corpus/$t"
    find "$corpus/$t" -type f ! -name 'crash-*' ! -name 'regress-*' -delete
done

# the hardware ini: the presets, and one with overrides after a NUL byte (fuzz_hw.c)
cp model/presets/*.ini "$corpus/hw/"
{ cat model/presets/4090.ini
  printf '\0ssd.count=3\nmemory.cpu_mem_GiB=256\ngpu.name=test\nssd.host_GBps=40\n'
  printf 'price.ssd_usd=300\nprice.host_usd=5000\ngpu.nvlink_GBps=64'; } \
    > "$corpus/hw/4090-with-overrides"

# a Hugging Face config.json: the tiny fixture's, Llama 3.1 8B's (transformers 4: rope_scaling),
# transformers 5's rope_parameters, Qwen2.5's, Mistral's window, GPT-2's
cp tests/data/llama-tiny-hf/config.json "$corpus/hf_config/llama-tiny-hf.json"
cat > "$corpus/hf_config/llama-3.1-8b.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
 "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
 "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
 "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "vocab_size": 128256}
JSON
cat > "$corpus/hf_config/rope-parameters.json" <<'JSON'
{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
 "max_position_embeddings": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
 "num_key_value_heads": 2, "vocab_size": 256, "tie_word_embeddings": true,
 "rope_parameters": {"rope_type": "llama3", "rope_theta": 250000.0, "factor": 8.0,
 "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}
JSON
cat > "$corpus/hf_config/qwen2.5-7b.json" <<'JSON'
{"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
 "max_position_embeddings": 131072, "num_attention_heads": 28, "num_hidden_layers": 28,
 "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "sliding_window": 131072, "use_sliding_window": false, "tie_word_embeddings": false,
 "vocab_size": 152064}
JSON
cat > "$corpus/hf_config/mistral-7b.json" <<'JSON'
{"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
 "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
 "sliding_window": 4096, "vocab_size": 32000}
JSON
cat > "$corpus/hf_config/gpt2.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
 "n_inner": null, "vocab_size": 50257}
JSON

# fuyou-plot's table reader and script writer: a kind byte, then title, output, input, measured,
# NUL-separated, then a table (fuzz_plot.c): plain requests of each kind, quotes and backquotes,
# a newline that must be refused; a table of each kind
mkdir -p "$corpus/plot"
printf '\000a title\000out.png\000trace.tsv' > "$corpus/plot/timeline"
printf '\001sweep\000s.svg\000sweep.tsv\000measured.tsv' > "$corpus/plot/sweep-measured"
printf '\202it'"'"'s `id` @x\000c.pdf\000joined.tsv' > "$corpus/plot/compare-quotes"
printf '\003\000o.png\000it'"'"'s.tsv' > "$corpus/plot/scatter"
printf '\004a\nsystem "touch PWNED"\000x.png\000b.tsv' > "$corpus/plot/batch-newline"
{ printf '\000t\000o.png\000t.tsv\000\000'; head -40 tests/golden/tiny_fuyou_h200.tsv; } \
    > "$corpus/plot/timeline-table"
printf '\001\000o.png\000s.tsv\000\000%s\n%s\n%s\n' \
    "$(printf 'swap_bytes\tunits\tclosed_form_s\tsim_time_s\tbottleneck\tfits\tplanner')" \
    "$(printf '0\t0\t1.5\t1.6\tgpu\t1\t1')" "$(printf '1073741824\t4\t1.2\t1.3\tssd_read\t0\t0')" \
    > "$corpus/plot/sweep-table"
joined=$(printf 'iter\ttask_id\tresource\tpred_start_s\tpred_end_s\tmeas_start_s\tmeas_end_s\n'
         printf '1\tF.b0.qkv\tgpu\t0.5\t0.6\t0.9\t1.05\n1\tH2D.b1.w\th2d\t0.5\t0.7\t\t')
printf '\204\000o.png\000j.tsv\000\000%s\n' "$joined" > "$corpus/plot/compare-table"
printf '\205\000o.png\000j.tsv\000\000%s\n' "$joined" > "$corpus/plot/scatter-table"
printf '\004\000o.png\000b.tsv\000\000%s\n%s\n%s\n' \
    "$(printf 'model\tbatch\tpredicted_tflops\tmeasured_tflops')" \
    "$(printf 'gpt3-2.7b\t8\t95.8\t101.2')" "$(printf 'gpt3-1.3b\t16\t120.0\tNaN')" \
    > "$corpus/plot/batch-table"

# the model ini: the test model, the micro model, and every key
cp tests/data/tiny.ini "$corpus/model_ini/tiny.ini"
cp tests/fuzz/micro.ini "$corpus/model_ini/micro.ini"
cat > "$corpus/model_ini/all-keys.ini" <<'INI'
[model]
name = my-model      ; optional, defaults to the file name
layers = 48
hidden = 6144
heads = 48
ffn = 24576          ; optional, defaults to 4 x hidden
vocab = 50257
max_seq = 2048
tied = false
dtype = fp16
INI

# a checkpoint the trainer writes: the micro model, 4 steps on a text
head -c 2000 /usr/share/common-licenses/GPL-3 > "$tmp/text.txt"
"$run" --model tests/fuzz/micro.ini --data "$tmp/text.txt" --batch 2 --seq 16 --steps 4 \
    --threads 1 --save "$tmp/ckpt" > /dev/null
step=$tmp/ckpt/$(cat "$tmp/ckpt/latest")
cp "$step/state.json" "$corpus/state/state.json"
cp "$step/model.safetensors" "$corpus/safetensors/micro-model.safetensors"
cp "$step/optimizer.safetensors" "$corpus/safetensors/micro-optimizer.safetensors"

# traces: the golden one, and a predicted trace with its dependencies (fuyou-sim --deps)
cp tests/golden/tiny_fuyou_h200.tsv "$corpus/trace/golden.tsv"
"$build/sim/fuyou-sim" --model gpt2-tiny --hw h200 --seq 64 --batch 2 --iters 2 \
    --trace "$corpus/trace/tiny-pred.tsv" --deps "$corpus/trace/tiny-deps.tsv" > /dev/null

# token files: text, llm.c (its three headers, and one with a damaged magic), headerless uint16,
# .npy of uint16 and uint32, and masks of the 64 tokens fuzz_tokens masks; and a
# safetensors file of every dtype the reader converts, without checksums (as the hub's are)
python3 - "$corpus" <<'PY'
import json, struct, sys
corpus = sys.argv[1]
text = b"It was the best of times, it was the worst of times.\n" * 2
tokens = [t % 50257 for t in range(0, 64 * 797, 797)]
def llmc(magic, toks):
    header = [magic, 1, len(toks)] + [0] * 253
    return struct.pack("<256i", *header) + struct.pack("<%dH" % len(toks), *toks)
def llmc32(magic, version, toks):
    header = [magic, version, len(toks)] + [0] * 253
    return struct.pack("<256i", *header) + struct.pack("<%dI" % len(toks), *toks)
def npy(descr, data, count):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (descr, count)
    d += " " * (-(10 + len(d) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + data
big = [t * 2477 % 152064 for t in range(64)]
files = {
    "tokens/text.txt": text,
    "tokens/llmc.bin": llmc(20240520, tokens),
    "tokens/llmc-damaged-magic.bin": llmc(20240521, tokens),
    "tokens/llmc-u32-v2.bin": llmc32(20240520, 2, big),
    "tokens/llmc-llama3-v7.bin": llmc32(20240801, 7, big),
    "tokens/u16.bin": struct.pack("<%dH" % len(tokens), *tokens),
    "tokens/u2.npy": npy("<u2", struct.pack("<%dH" % len(tokens), *tokens), len(tokens)),
    "tokens/u4.npy": npy("<u4", struct.pack("<%dI" % len(big), *big), len(big)),
    "tokens/mask.npy": npy("|u1", bytes(i % 2 for i in range(64)), 64),
    "tokens/mask-raw": bytes(i % 3 != 0 for i in range(64)),
}
data = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
data += struct.pack("<4H", 0x3c00, 0xc000, 0x3800, 0x7c00)    # F16: 1, -2, 0.5, inf
data += struct.pack("<2H", 0x3f80, 0xbf80)                    # BF16: 1, -1
header = {"__metadata__": {"format": "pt"},
          "a.f32": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b.f16": {"dtype": "F16", "shape": [4], "data_offsets": [16, 24]},
          "c.bf16": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [24, 28]}}
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
files["safetensors/dtypes.safetensors"] = struct.pack("<Q", len(h)) + h + data
for name, content in files.items():
    with open(f"{corpus}/{name}", "wb") as f:
        f.write(content)
PY
for t in hw model_ini hf_config safetensors tokens state trace plot; do
    echo "$corpus/$t: $(find "$corpus/$t" -type f | wc -l) files"
done
