#!/usr/bin/env python3
"""Expected token ids from Hugging Face `tokenizers` for tests/test_hf_tokenizer.c.

For each configuration below, this builds a tokenizer.json from a shared
GGUF vocabulary (../shared/vocab) the way tests/common/hf_tokjson.c does:
model.vocab = every token that is not control or user-defined, added_tokens =
those (control: special), merges = tokenizer.ggml.merges, with the
configuration's normalizer and pre-tokenizer. It then encodes test strings
with `tokenizers` (add_special_tokens=False) and writes them with the ids to
tests/data/hf_tok_vectors.txt. The C test builds the same tokenizer.json
in C, converts it with tf_hf_tokenizer_to_gguf and must give the same ids;
it needs no Python.

Test strings: the vocabulary's llama.cpp vector strings (.inp), hand-made
strings aimed at the pre-tokenizer, and slices of ../shared/text.

Usage (from the repository root):
    python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers
    /tmp/venv-tok/bin/python tests/data/gen_hf_tok_vectors.py [../shared]
"""
import json
import os
import struct
import sys

import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared")
OUT = os.path.join(ROOT, "tests", "data", "hf_tok_vectors.txt")

GPT2_RX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2's: Llama 3's with single digits
QWEN2_RX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")


SPACE = "\u2581"
SPM_NORM = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SPACE},
                                                {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]}
SPM_METASPACE = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "first", "split": False}


def split(pattern, behavior="Isolated", invert=False, literal=False):
    return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern}, "behavior": behavior,
            "invert": invert}


def byte_level(add_prefix_space=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True,
            "use_regex": use_regex}


def seq(*items):
    return {"type": "Sequence", "pretokenizers": list(items)}


# name, vocabulary, normalizer, pre_tokenizer
CONFIGS = [
    # SmolLM2: single digits, then GPT-2's regex (tokenizer.ggml.pre "starcoder")
    ("smollm2", "gpt-2", None, seq({"type": "Digits", "individual_digits": True}, byte_level())),
    # Llama 3: its Split regex, then ByteLevel without a regex (pre "smaug-bpe": ignore_merges is false here)
    ("llama3-split", "gpt-2", None, seq(split(LLAMA3_RX), byte_level(use_regex=False))),
    # digit runs and a prefix space on every piece (a pre-tokenizer program)
    ("digits-prefix", "gpt-2", {"type": "NFC"},
     seq({"type": "Digits", "individual_digits": False}, byte_level(add_prefix_space=True))),
    # ByteLevel alone with add_prefix_space
    ("bytelevel-prefix", "gpt-2", None, byte_level(add_prefix_space=True)),
    # every split behaviour, literal and regex patterns, inverted or not
    ("behaviours-a", "gpt-2", None,
     seq(split("-", "Removed", literal=True), split(r"\s", "MergedWithNext"), split(r"\p{P}", "MergedWithPrevious"),
         byte_level(use_regex=False))),
    ("behaviours-b", "gpt-2", None,
     seq(split(r"\p{N}", "Contiguous"), split(r"[aeiou]", "Isolated", invert=True),
         split(r"\s+$", "Isolated"), byte_level())),
    ("behaviours-c", "gpt-2", None,
     seq(split(r"[.,!?]", "MergedWithNext", invert=True), split(r"\p{L}+", "Contiguous", invert=True),
         split("o", "Removed", literal=True), byte_level(use_regex=False))),
    ("behaviours-d", "gpt-2", None,
     seq(split(r"\s+", "Removed", invert=True), split("  ", "MergedWithPrevious", literal=True, invert=True),
         byte_level(use_regex=False))),
    # DeepSeek Coder's and DeepSeek LLM's Sequence of Splits as their tokenizer.json files spell them
    ("deepseek-coder", "deepseek-coder", None,
     seq(split("[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split("[一-龥ࠀ-一가-퟿]+"), split(r"\p{N}"),
         byte_level(use_regex=False))),
    ("deepseek-llm", "deepseek-llm", None,
     seq(split("[\r\n]"),
         split("\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ"
               "\u1f5f-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳ"
               "Ꙁ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ\U00010400-\U0001044f𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"),
         split("\\s?[!-/:-~！-／：-～‘-‟　-。]+"), split(r"\s+$"), split("[一-龥ࠀ-一가-퟿]+"), split(r"\p{N}+"),
         byte_level(use_regex=False))),
    # Qwen2 / Qwen2.5: NFC, its Split regex, then ByteLevel without a regex (pre "qwen2")
    ("qwen2-split", "gpt-2", {"type": "NFC"}, seq(split(QWEN2_RX), byte_level(use_regex=False))),
    # SentencePiece-style BPE (Llama 2, Mistral, Phi-3): byte fallback, merges from the scores; the space
    # marker by a Prepend + Replace normalizer (Llama 2's tokenizer.json) or by a Metaspace pre-tokenizer
    # that does not split (newer files)
    ("llama-spm-norm", "llama-spm", SPM_NORM, None),
    ("llama-spm-metaspace", "llama-spm", None, SPM_METASPACE),
    ("llama-spm-ms-always", "llama-spm", None, dict(SPM_METASPACE, prepend_scheme="always")),
    ("llama-spm-ms-legacy", "llama-spm", None, {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True, "split": False}),
    ("phi-3-norm", "phi-3", SPM_NORM, None),
    ("phi-3-metaspace", "phi-3", None, SPM_METASPACE),
]

HANDMADE = [
    "x=1234567, y=89;",
    "Price: $1,299.99 (was $2 000) -- 50% off!",
    "a-b--c---d - e",
    "line one\nline two\r\nline three\n\n\nend  \n  ",
    "tabs\tand\t\tspaces   here   ",
    "ends with spaces   ",
    "   starts with spaces",
    "non-breaking\u00a0space and ideographic\u3000space",
    "next line\u0085char and thin\u2009space",
    "full-width ＡＢＣ！？ and quotes \u201chi\u201d \u2018yo\u2019",
    "数字１２３ and ٣٤٥ and Ⅻ and ½",
    "I'm sure you'll see it's THEIR'S, we'D go",
    "emoji 🦙🚀 mixed with text🙂123",
    "中文字符和English混合，还有标点。",
    "한국어 텍스트 그리고 日本語のテキスト",
    "Ελληνικά και Русский текст",
    "a",
    " ",
    "",
    "...!!!???",
    # not in NFC: combining accents, a ring, dot below + dot above, Hangul jamo (the NFC configuration composes them)
    "Cafe\u0301 au lait, re\u0301sume\u0301 and A\u030angstro\u0308m",
    "s\u0323\u0307 and q\u0307\u0323 and \u1100\u1161\u11a8 and \u212b",
    " <|user|> hi<|end|>\n<|assistant|> ok<|end|>",
]
# Llama 2's control tokens inside the text (added tokens are split out first; where the "▁" goes after them
# depends on the pre-tokenizer). Only for that vocabulary: Phi-3's "</s>" is user-defined, and this harness
# marks user-defined added tokens "normalized", which tokenizers then matches with Prepend's "▁" applied.
SPECIALS = {"llama-spm": ["<s> Hello</s> world <s>x</s>", "<s>[INST] Who are you? [/INST]"]}


def read_gguf_vocab(path):
    """The key/value pairs of a GGUF file's header."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF", path
    pos = 4
    take("I")  # version
    take("Q")  # tensors
    n_kv = take("Q")
    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(take("I"))
    return kv


def spm_merges(tokens, scores, vocab):
    """Every split of a model.vocab piece at a character boundary into two
    model.vocab pieces, in the order of HF's SentencePiece converter (as
    tests/common/hf_tokjson.c): the result's score (highest first), then the
    ids of the result and of the parts."""
    out = []
    for t, piece in enumerate(tokens):
        if vocab.get(piece) != t:
            continue
        for k in range(1, len(piece)):
            a, b = vocab.get(piece[:k]), vocab.get(piece[k:])
            if a is not None and b is not None:
                out.append((-scores[t], t, a, b))
    out.sort()
    return [[tokens[a], tokens[b]] for _, _, a, b in out]


def build(vocab_name, normalizer, pre):
    kv = read_gguf_vocab(os.path.join(SHARED, "vocab", "ggml-vocab-%s.gguf" % vocab_name))
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    spm = kv["tokenizer.ggml.model"] == "llama"
    unk = kv.get("tokenizer.ggml.unknown_token_id", -1) if spm else -1
    added, vocab = [], {}
    for i, (t, ty) in enumerate(zip(tokens, types)):
        in_model = ty not in (3, 4)  # control, user-defined: added_tokens only
        if in_model:
            vocab.setdefault(t, i)
        if not in_model or i == unk:
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": ty == 4, "special": ty != 4})
    if spm:
        merges = spm_merges(tokens, kv["tokenizer.ggml.scores"], vocab)
        # SentencePiece files (Llama 2's) list their control tokens in model.vocab too, at their ids (without
        # that, tokenizers gives added tokens that are missing from the model new ids after the vocabulary)
        vocab = dict(vocab)
        for i, (t, ty) in enumerate(zip(tokens, types)):
            if ty == 3:
                vocab.setdefault(t, i)
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        merges = [m.split(" ", 1) for m in kv["tokenizer.ggml.merges"]]
        decoder = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": None, "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk] if unk >= 0 else None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": None, "fuse_unk": spm,
                  "byte_fallback": spm, "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    return Tokenizer.from_str(json.dumps(doc))


def texts_for(vocab_name):
    with open(os.path.join(SHARED, "vocab", "ggml-vocab-%s.gguf.inp" % vocab_name), encoding="utf-8") as f:
        inp = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    out = inp + HANDMADE + SPECIALS.get(vocab_name, [])
    for name, at in (("moby-dick", 0.3), ("war_and_peace", 0.6), ("ulysses", 0.5)):
        with open(os.path.join(SHARED, "text", name + ".txt"), encoding="utf-8") as f:
            t = f.read()
        k = int(len(t) * at)
        out.append(t[k:k + 700])
    return out


def main():
    lines = ["# Expected ids from Hugging Face tokenizers %s; generated by tests/data/gen_hf_tok_vectors.py "
             "(do not edit)." % tokenizers.__version__,
             "# config <name> <vocabulary>; normalizer/pre_tokenizer <JSON>; text <UTF-8 as hex>; ids <ids>"]
    for name, vocab_name, normalizer, pre in CONFIGS:
        tok = build(vocab_name, normalizer, pre)
        lines.append("config %s %s" % (name, vocab_name))
        lines.append("normalizer " + json.dumps(normalizer, ensure_ascii=True))
        lines.append("pre_tokenizer " + json.dumps(pre, ensure_ascii=True))
        for text in texts_for(vocab_name):
            ids = tok.encode(text, add_special_tokens=False).ids
            lines.append("text " + text.encode("utf-8").hex())
            lines.append("ids " + " ".join(map(str, ids)))
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\nend\n")
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
