#!/usr/bin/env python3
"""The pair's tokenizer: a byte-level BPE trained with Hugging Face `tokenizers` on the corpus's
training split, and the reference encodings exactq's tokenizer must reproduce.

Byte-level with GPT-2's pre-tokenizer split, so every byte string has an encoding; three special
tokens (<|bos|> 0, <|eos|> 1, <|pad|> 2); the post-processor puts <|bos|> before each encoding.

Writes OUT/tokenizer.json, OUT/tokenizer_config.json and OUT/tokenizer-reference.json: a few
hundred strings (hand-written edge cases, random slices of held-out files, random code points)
with the ids `tokenizers` gives them, with and without the special tokens.
"""
import argparse
import json
import os
import random
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SPECIAL = ["<|bos|>", "<|eos|>", "<|pad|>"]

HAND_WRITTEN = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "\t\t x", "\r\n", "a", "def f(x):\n    return x + 1\n",
    "class Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, *args, **kwargs):\n        super().__init__()\n",
    "import os, sys\nfrom collections import OrderedDict as OD\n",
    "for i in range(10):\n\tprint(i, end='')\n", "x = [1, 2, 3]  # trailing spaces   ", "    \n    \n",
    "if a == b and c != d or not e: pass", "lambda: None", "@decorator\ndef g(): ...", "0x1F 1e-5 3.14159 1_000_000",
    "The quick brown fox jumps over the lazy dog.", "Don't panic: it's only a test, isn't it? We'll see; they've gone.",
    "HELLO World hello WORLD", "naïve café résumé", "e\u0301 (combining acute)", "Straße ß ẞ", "Ελληνικά κείμενα",
    "Русский текст", "日本語のテキスト", "中文文本测试", "한국어", "עברית", "العربية", "हिन्दी", "ไทย",
    "emoji 🙂🚀👍🏽 and family 👨\u200d👩\u200d👧", "🇩🇪🇯🇵", "math ∑∫√∞ ≤ ≥ ≠", "zero\u200bwidth", "\u00a0non-breaking\u00a0space",
    "<|eos|>", "text<|bos|>more", "<|pad|><|pad|>", "< |eos| >", "<|unknown|>", "''' triple '''", '"""', "f'{x!r:>10}'",
    "a\u2028b\u2029c", "\x00\x01\x7f", "tab\there", "    indented line", "        deeper", "x" * 300, " " * 64 + "y",
    "\n" * 20, "0123456789" * 5, "__init__ __main__ __name__", "self.assertEqual(a, b)", "# -*- coding: utf-8 -*-",
    "#!/usr/bin/env python3", "print('hello, world')", "try:\n    pass\nexcept Exception as e:\n    raise\n",
    "async def main():\n    await asyncio.sleep(1)\n", "with open(path, 'rb') as f:\n    data = f.read()\n",
]


def random_code_points(rng, n):
    ranges = [(0x20, 0x7e), (0x09, 0x0d), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x4e00, 0x4fff),
              (0x1f300, 0x1f64f), (0x300, 0x36f), (0x2000, 0x206f), (0xac00, 0xad00)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def reference_strings(val_texts, rng):
    strings = list(HAND_WRITTEN)
    for _ in range(150):
        t = rng.choice(val_texts)
        start = rng.randrange(len(t))
        strings.append(t[start:start + rng.randint(1, 400)])
    for _ in range(100):
        strings.append(random_code_points(rng, rng.randint(1, 40)))
    return strings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="directory with corpus.jsonl (train/corpus.py)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    docs = [json.loads(line) for line in open(os.path.join(args.corpus, "corpus.jsonl"), encoding="utf-8")]
    train = [d["text"] for d in docs if d["split"] == "train"]
    val = [d["text"] for d in docs if d["split"] == "val"]

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", 0)])
    assert tok.get_vocab_size() == args.vocab, tok.get_vocab_size()
    assert [tok.token_to_id(s) for s in SPECIAL] == [0, 1, 2]

    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>",
                   "model_max_length": 4096, "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)

    rng = random.Random(args.seed)
    cases = []
    for s in reference_strings(val, rng):
        cases.append({"text": s, "ids": tok.encode(s).ids, "ids_plain": tok.encode(s, add_special_tokens=False).ids})
    with open(os.path.join(args.out, "tokenizer-reference.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "train/tokenizer.py", "tokenizers_version": __import__("tokenizers").__version__,
                   "seed": args.seed, "cases": cases}, f, ensure_ascii=False, indent=0)
    total = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in train[:50])
    print(f"tokenizer: vocab {tok.get_vocab_size()}, {len(cases)} reference strings, "
          f"{sum(len(t) for t in train[:50]) / max(total, 1):.2f} characters per token on 50 training files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
