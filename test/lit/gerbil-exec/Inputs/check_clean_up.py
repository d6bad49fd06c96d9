"""Checks that gerbil-exec's text output follows tokenizer_config.json's clean_up_tokenization_spaces.

llama-tiny-text's random weights make no text with " ." or " n't" in it, so the vocabulary is rearranged:
the ids that the model generates greedily after "hello" are given the strings " ", ",", " n", "'", "t", ... (their
old strings get those ids instead, and the prompt's own tokens are left alone, so the prompt ids and therefore
the generated ids stay the same). Then the same generation runs with clean_up_tokenization_spaces false and
true: the first must print the raw text, the second transformers' clean_up_tokenization of it, streamed and
in --json alike.
usage: check_clean_up.py PLAN MODEL_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

plan, model_dir, work = sys.argv[1:4]
STRINGS = ["Ġ", ",", "Ġn", "'", "t", ".", "Ġdo", "!", "?", "s", "m"]


def clean_up_tokenization(text):
    """transformers' PreTrainedTokenizerBase.clean_up_tokenization."""
    for old, new in [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                     (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]:
        text = text.replace(old, new)
    return text


def run(tokenizer, *args):
    r = subprocess.run(["gerbil-exec", plan, "--weights", model_dir, "--tokenizer", tokenizer, "--prompt", "hello",
                        "--max-new-tokens", "16", "--ignore-eos", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("gerbil-exec failed (%d): %s" % (r.returncode, r.stderr))
    return r.stdout


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


original = json.loads(run(os.path.join(model_dir, "tokenizer.json"), "--json"))
tokenizer = json.load(open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8"))
vocab = tokenizer["model"]["vocab"]
string_of = {i: s for s, i in vocab.items()}
prompt = set(original["prompt_ids"])
wanted = iter(STRINGS)
for target in dict.fromkeys(original["output_ids"]):  # the distinct ids, in order
    if target in prompt or target not in string_of:
        continue
    string = next((s for s in wanted if vocab[s] not in prompt), None)
    if string is None:
        break
    old_id, old_string = vocab[string], string_of[target]
    vocab[string], vocab[old_string] = target, old_id
    string_of[target], string_of[old_id] = string, old_string

for clean in (False, True):
    folder = os.path.join(work, "clean-%s" % str(clean).lower())
    os.makedirs(folder, exist_ok=True)
    json.dump(tokenizer, open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    json.dump({"eos_token": "<|im_end|>", "clean_up_tokenization_spaces": clean},
              open(os.path.join(folder, "tokenizer_config.json"), "w"))

path = lambda clean: os.path.join(work, "clean-%s" % clean, "tokenizer.json")
raw = json.loads(run(path("false"), "--json"))
check(raw["prompt_ids"] == original["prompt_ids"] and raw["output_ids"] == original["output_ids"],
      "the rearranged vocabulary changed the ids: %s" % raw)
expected = clean_up_tokenization(raw["text"])
check(expected != raw["text"], "nothing to clean up in %r" % raw["text"])
print("raw: %s" % json.dumps(raw["text"]))
check(run(path("false")) == raw["text"] + "\n", "streamed without clean-up")
cleaned = json.loads(run(path("true"), "--json"))
check(cleaned["output_ids"] == raw["output_ids"], "clean-up changed the ids")
check(cleaned["text"] == expected, "--json text %r, transformers gives %r" % (cleaned["text"], expected))
streamed = run(path("true"))
check(streamed == expected + "\n", "streamed %r, transformers gives %r" % (streamed, expected))
print("cleaned: %s" % json.dumps(cleaned["text"]))
