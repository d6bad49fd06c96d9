"""Runs gerbil-exec's text modes on llama-tiny-text and checks the structure of what they print.

The weights are random, so the text itself means nothing; what must hold is that the ids and the text agree
(decoded here with the fixture's own vocabulary, independently of gerbil's tokenizer), that streaming prints
exactly the text of --json, that stop strings and generation_config.json stop tokens end generation, and that
a chat re-renders the conversation and reuses its KV cache (checked against a fresh run on the same ids).
Prints one "ok" line per check for FileCheck; fails with a message otherwise.
usage: check_text.py PLAN MODEL_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

plan, model_dir, work = sys.argv[1:4]
tokenizer = json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8"))
id_to_token = {i: t for t, i in tokenizer["model"]["vocab"].items()}
special = {t["id"]: t["content"] for t in tokenizer["added_tokens"]}
# GPT-2's byte-to-unicode map, inverted.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
byte_of = {chr(c): b for b, c in zip(bs, cs)}


def decode(ids, skip_special=True):
    out, pending = "", b""
    for i in ids:
        if i in special:
            out += pending.decode("utf-8", "replace")
            pending = b""
            if not skip_special:
                out += special[i]
        else:
            pending += bytes(byte_of[c] for c in id_to_token[i])
    return out + pending.decode("utf-8", "replace")


def run(*args, stdin=None):
    r = subprocess.run(["gerbil-exec", plan, *args], input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("gerbil-exec %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


STOP_IDS = {2, 509, 511}  # config.json's eos, generation_config.json's and the tokenizer's

# --prompt: the prompt ids are the text's, the output ids decode to the text.
result = json.loads(run("--prompt", "hello", "--max-new-tokens", "12", "--json").stdout)
check(decode(result["prompt_ids"]) == "hello", "prompt ids %s are not 'hello'" % result["prompt_ids"])
out = result["output_ids"]
check(0 < len(out) <= 12, "%d output ids" % len(out))
check(result["stop_reason"] in ("length", "stop_token"), result["stop_reason"])
text_ids = [i for i in out if i not in STOP_IDS]
check(decode(text_ids) == result["text"], "text %r is not the decoded ids %r" % (result["text"], decode(text_ids)))
print("prompt: ok")

# Streaming prints exactly that text (and a newline), the statistics go to stderr.
streamed = run("--prompt", "hello", "--max-new-tokens", "12")
check(streamed.stdout == result["text"] + "\n", "streamed %r, not %r" % (streamed.stdout, result["text"]))
check("prompt 4 tokens in" in streamed.stderr and "new tokens in" in streamed.stderr, streamed.stderr)
print("stream: ok")

# A stop string: the text ends before it, and generation ends there.
text = result["text"]
stop = text[3:5]
check(len(stop) == 2 and not stop.isspace(), "no stop string to try in %r" % text)
stopped = json.loads(run("--prompt", "hello", "--max-new-tokens", "12", "--stop", stop, "--json").stdout)
check(stopped["text"] == text[: text.find(stop)], "stop %r: %r" % (stop, stopped["text"]))
check(stopped["stop_reason"] == "stop_string", stopped["stop_reason"])
check(stopped["output_ids"] == out[: len(stopped["output_ids"])] and len(stopped["output_ids"]) < len(out),
      "stop %r: ids %s" % (stop, stopped["output_ids"]))
print("stop string: ok")

# generation_config.json's eos_token_id: make the third generated token a stop token.
folder = os.path.join(work, "stop-token")
os.makedirs(folder, exist_ok=True)
for name in ["model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
    shutil.copy(os.path.join(model_dir, name), folder)
json.dump({"eos_token_id": [out[2]]}, open(os.path.join(folder, "generation_config.json"), "w"))
eos = json.loads(run("--weights", folder, "--prompt", "hello", "--max-new-tokens", "12", "--json").stdout)
check(eos["output_ids"] == out[:3] and eos["stop_reason"] == "stop_token", "eos %d: %s" % (out[2], eos))
check(eos["text"] == decode(out[:2]), "eos text %r" % eos["text"])
ignored = json.loads(run("--weights", folder, "--prompt", "hello", "--max-new-tokens", "12", "--ignore-eos",
                         "--json").stdout)
check(ignored["output_ids"] == out, "--ignore-eos: %s" % ignored["output_ids"])
print("stop token: ok")

# A chat of two turns with a system message.
turns = [json.loads(line) for line in run("--chat", "--system", "Be brief.", "--max-new-tokens", "8", "--json",
                                          stdin="hello\n\nhow are you\n/exit\nnever read\n").stdout.splitlines()]
check(len(turns) == 2, "%d chat turns" % len(turns))
first = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"
check(decode(turns[0]["prompt_ids"], False) == first, "turn 0 prompt %r" % decode(turns[0]["prompt_ids"], False))
second = first + turns[0]["text"] + "<|im_end|>\n<|im_start|>user\nhow are you<|im_end|>\n<|im_start|>assistant\n"
check(decode(turns[1]["prompt_ids"], False) == second, "turn 1 prompt %r" % decode(turns[1]["prompt_ids"], False))
check(turns[0]["reused_tokens"] == 0, "turn 0 reused %d" % turns[0]["reused_tokens"])
check(turns[1]["reused_tokens"] > len(turns[0]["prompt_ids"]), "turn 1 reused %d" % turns[1]["reused_tokens"])
for turn in turns:
    check(decode([i for i in turn["output_ids"] if i not in STOP_IDS]) == turn["text"], "turn %d text" % turn["turn"])
print("chat: ok")

# The second turn, generated on top of the first turn's cache, is what a fresh run on the same ids makes.
ids = ",".join(map(str, turns[1]["prompt_ids"]))
fresh = json.loads(run("--prompt-ids", ids, "--max-new-tokens", "8", "--json").stdout)
check(fresh["output_ids"][: len(turns[1]["output_ids"])] == turns[1]["output_ids"],
      "cached %s, fresh %s" % (turns[1]["output_ids"], fresh["output_ids"]))
print("chat cache: ok")

# Without --json the replies stream to stdout, one a line, and /reset starts over.
plain = run("--chat", "--system", "Be brief.", "--max-new-tokens", "8", stdin="hello\nhow are you\n")
check(plain.stdout == turns[0]["text"] + "\n" + turns[1]["text"] + "\n", "chat stdout %r" % plain.stdout)
check(plain.stderr.count("new tokens in") == 2, plain.stderr)
reset = [json.loads(line) for line in run("--chat", "--system", "Be brief.", "--max-new-tokens", "8", "--json",
                                          stdin="hello\n/reset\nhello\n").stdout.splitlines()]
check(len(reset) == 2 and reset[1]["prompt_ids"] == turns[0]["prompt_ids"] and reset[1]["reused_tokens"] == 0 and
      reset[1]["output_ids"] == turns[0]["output_ids"], "/reset: %s" % reset)
print("chat stream: ok")
