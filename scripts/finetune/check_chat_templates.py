#!/usr/bin/env python3
"""Checks Patchbay's chat-template renderer against Python's jinja2 on real templates.

Patchbay renders chat templates with its own evaluator of the Jinja subset they use
(core/eval/jinja_template.hpp). This script renders the same conversations with jinja2 the way
transformers' apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, raise_exception, a json.dumps tojson) and with
`patchbay chat-template TEMPLATE FILE.jsonl`, and compares the texts byte for byte, with and
without the generation prompt. It also checks that Patchbay's assistant segments concatenate to
the text and equal the spans found here by rendering prefixes.

Templates: the built-ins chatml and llama3 (jinja2 renders the copies of their text below,
Patchbay its own strings in core/eval/chat_template.cpp), SmolLM2-135M-Instruct's own template (from the GGUF file fetched by scripts/finetune/fetch_smollm2.sh, via the `gguf`
package, or from a run imported with `patchbay import`: --smollm2-run), and the feature fixture
tests/eval/fixtures/jinja_features.jinja.

    python scripts/finetune/check_chat_templates.py --patchbay build/patchbay \
        [--smollm2-run runs/smollm2 | --gguf data/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]

Needs jinja2 (pip install jinja2 into a venv under /work/.venvs/). Not run by CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The built-ins' Jinja text, as core/eval/chat_template.cpp holds it (ChatML without a default
# system message; Meta-Llama-3-8B-Instruct's template verbatim).
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
          "<|end_header_id|>\\n\\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
    [{"role": "system", "content": "  Be brief. "}, {"role": "user", "content": "What does 'ephemeral' mean?"},
     {"role": "assistant", "content": "Lasting a very short time."}, {"role": "user", "content": "And 'eternal'?"},
     {"role": "assistant", "content": " Lasting forever.\n"}],
    [{"role": "user", "content": "Ünïcödé ✓ and \"quotes\" and {{ braces }} and {% tags %}"},
     {"role": "assistant", "content": "Noted: {{ x }}"}, {"role": "user", "content": "Bye"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "one"}, {"role": "assistant", "content": "1"},
     {"role": "user", "content": "two"}, {"role": "assistant", "content": "2"}, {"role": "user", "content": "three"},
     {"role": "assistant", "content": "3"}],
]


def environment():
    def raise_exception(message):
        raise Exception(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(env, source, messages, generation_prompt, bos, eos):
    return env.from_string(source).render(messages=messages, add_generation_prompt=generation_prompt,
                                          bos_token=bos, eos_token=eos)


def prefix_spans(env, source, messages, bos, eos):
    """Assistant spans by rendering prefixes (the rule of core/eval/chat_template.hpp)."""
    spans = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = render(env, source, messages[:i], True, bos, eos)
        upto = render(env, source, messages[:i + 1], False, bos, eos)
        spans.append(upto[len(before):])
    return spans


def smollm2_template(args):
    if args.smollm2_run:
        with open(os.path.join(args.smollm2_run, "chat_template.jinja"), encoding="utf-8") as f:
            return f.read(), args.smollm2_run
    if args.gguf:
        from gguf import GGUFReader  # the package transformers reads GGUF files with
        field = GGUFReader(args.gguf).fields["tokenizer.chat_template"]
        text = bytes(field.parts[field.data[0]]).decode("utf-8")
        folder = tempfile.mkdtemp()
        path = os.path.join(folder, "chat_template.jinja")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        with open(os.path.join(folder, "imported_model.json"), "w") as f:
            json.dump({"bos_token": {"text": "<|im_start|>"}, "eos_token": {"text": "<|im_end|>"}}, f)
        return text, folder
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--patchbay", default=os.path.join(ROOT, "build", "patchbay"))
    parser.add_argument("--smollm2-run", help="a run imported from SmolLM2's GGUF (holds chat_template.jinja)")
    parser.add_argument("--gguf", help="SmolLM2-135M-Instruct.Q4_1.gguf (read with the gguf package)")
    args = parser.parse_args()
    env = environment()
    folder = tempfile.mkdtemp()
    conversations_file = os.path.join(folder, "conversations.jsonl")
    with open(conversations_file, "w", encoding="utf-8") as f:
        for messages in CONVERSATIONS:
            f.write(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
    features = os.path.join(ROOT, "tests", "eval", "fixtures", "jinja_features.jinja")
    with open(features, encoding="utf-8") as f:
        features_text = f.read()
    cases = [("chatml", CHATML, "chatml", "", "<|im_end|>"),
             ("llama3", LLAMA3, "llama3", "<|begin_of_text|>", "<|eot_id|>"),
             ("features fixture", features_text, features, "", "")]
    smol_text, smol_spec = smollm2_template(args)
    if smol_text is None:
        print("SmolLM2: skipped (give --smollm2-run or --gguf)")
    else:
        cases.append(("SmolLM2-135M-Instruct", smol_text, smol_spec, "<|im_start|>", "<|im_end|>"))
    failures = 0
    for name, source, spec, bos, eos in cases:
        out = subprocess.run([args.patchbay, "chat-template", spec, conversations_file], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        ok = 0
        for messages, line in zip(CONVERSATIONS, out):
            got = json.loads(line)
            for key, generation_prompt in (("text", False), ("prompt", True)):
                try:
                    want = render(env, source, messages, generation_prompt, bos, eos)
                except Exception as e:  # the template refuses this conversation
                    want = "error: " + str(e)
                have = got.get(key, "error: " + got.get("error", ""))
                if want.startswith("error: ") and have.startswith("error: "):
                    ok += 1
                    continue
                if have != want:
                    failures += 1
                    print(f"{name}: {key} differs\n  jinja2:   {want!r}\n  patchbay: {have!r}")
                else:
                    ok += 1
            if got.get("segments"):
                joined = "".join(text for text, _ in got["segments"])
                spans = [text for text, assistant in got["segments"] if assistant]
                if joined != got["text"] or spans != prefix_spans(env, source, messages, bos, eos):
                    failures += 1
                    print(f"{name}: assistant segments differ from jinja2's prefix renderings: {got['segments']!r}")
        print(f"{name}: {ok} of {2 * len(CONVERSATIONS)} renderings equal jinja2's")
    print("OK" if failures == 0 else f"{failures} differences")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
