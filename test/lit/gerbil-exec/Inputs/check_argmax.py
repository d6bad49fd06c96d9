"""Checks that gerbil-exec's GPU greedy tokens (GPU_JSON) equal its host greedy tokens (HOST_JSON) and the
argmax (lowest index on ties) of the logits that run dumped. usage: check_argmax.py GPU_JSON HOST_JSON LOGITS"""
import array
import json
import struct
import sys


def read_f32_tensors(path):
    data = open(path, "rb").read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_bytes])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']}"
        begin, end = info["data_offsets"]
        values = array.array("f", data[8 + header_bytes + begin : 8 + header_bytes + end])
        tensors[name] = (info["shape"], values)
    return tensors


def argmax_rows(shape, values):
    rows, vocab = shape
    return [max(range(vocab), key=lambda i: (values[r * vocab + i], -i)) for r in range(rows)]


gpu = json.load(open(sys.argv[1]))["output_ids"]
host = json.load(open(sys.argv[2]))["output_ids"]
tensors = read_f32_tensors(sys.argv[3])
# step_logits[i]: the logits token i was chosen from (row 0 is the prompt's last row of `logits`).
expected = argmax_rows(*tensors["step_logits"])
if expected[0] != argmax_rows(*tensors["logits"])[-1]:
    sys.exit("step_logits[0] is not the prompt's last row of logits")
if not (gpu == host == expected):
    sys.exit(f"GPU {gpu}\nhost {host}\nargmax of the logits {expected}")
print(f"{len(gpu)} tokens: GPU argmax = host argmax = argmax of the logits")
