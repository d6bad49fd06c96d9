"""Ctrl-C (SIGINT) in --chat and --prompt, as a terminal sends it, once the reply has begun to stream.

During a reply it ends the reply, and the chat takes the next message; at the chat's prompt it ends
gerbil-exec with exit code 130 after a newline; in --prompt it ends the text, which still gets its newline
and statistics, and gives exit code 130.
usage: check_interrupt.py PLAN (of --max-seq 80: a reply runs to 50 tokens and more unless interrupted)
"""
import os
import signal
import subprocess
import sys
import time

plan = sys.argv[1]


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


def start(*args):
    return subprocess.Popen(["gerbil-exec", plan, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def wait_for_stderr(process, text):
    seen = b""
    while text not in seen:
        byte = process.stderr.read(1)
        check(byte, "stderr ended before %r: %r" % (text, seen))
        seen += byte
    return seen


# --chat: interrupt the first reply (once it has begun streaming), then one more turn and end of input.
chat = start("--chat", "--max-new-tokens", "200", "--ignore-eos")
chat.stdin.write(b"tell me a long story\n")
chat.stdin.flush()
check(chat.stdout.read(1), "no reply began")
chat.send_signal(signal.SIGINT)
first = wait_for_stderr(chat, b"new tokens in")
out, err = chat.communicate(b"hello\n", timeout=120)
check(chat.returncode == 0, "chat exit code %d: %r" % (chat.returncode, err))
interrupted_tokens = int(first.split(b" new tokens in")[0].rsplit(b" ", 1)[1])
check(0 < interrupted_tokens < 50, "the interrupted reply has %d tokens" % interrupted_tokens)
check(b"new tokens in" in err, "the second turn made no reply: %r" % err)
print("chat reply interrupted: ok")

# --chat: Ctrl-C while it waits for the next message.
chat = start("--chat", "--max-new-tokens", "2")
chat.stdin.write(b"hello\n")
chat.stdin.flush()
wait_for_stderr(chat, b"new tokens in")
time.sleep(0.5)  # back at the prompt
chat.send_signal(signal.SIGINT)
out, err = chat.communicate(timeout=60)
check(chat.returncode == 130, "exit code %d at the prompt" % chat.returncode)
check(err.endswith(b"\n"), "no newline at the end: %r" % err)
print("chat prompt interrupted: ok")

# --prompt: the text ends early, with its newline and statistics.
prompt = start("--prompt", "hello", "--max-new-tokens", "70", "--ignore-eos")
check(prompt.stdout.read(1), "no text began")
prompt.send_signal(signal.SIGINT)
out, err = prompt.communicate(timeout=60)
check(prompt.returncode == 130, "--prompt exit code %d" % prompt.returncode)
check(out.endswith(b"\n") and b"new tokens in" in err, "--prompt output %r, %r" % (out[-20:], err))
check(int(err.split(b" new tokens in")[0].rsplit(b" ", 1)[1]) < 50, "--prompt was not interrupted: %r" % err)
print("prompt interrupted: ok")
