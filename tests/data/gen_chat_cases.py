#!/usr/bin/env python3
"""Writes tests/data/chat_cases.inc: published chat templates of each family
that tf_model_chat_prompt recognises, rendered by Jinja2 the way Hugging Face's
apply_chat_template renders them (trim_blocks, lstrip_blocks,
add_generation_prompt), for [system?, user] conversations (chat_cases.inc) and
for conversations of several turns (chat_multi_cases.inc). bos_token and
eos_token render as the texts of the model family's own tokens (TOKENS), and
one BOS at the very start is dropped: the engine's tokenizer adds that one
itself (a BOS inside the text, as llama2 writes before each later turn, stays).

    python3 tests/data/gen_chat_cases.py   (needs jinja2)
"""
import os
import jinja2

TEMPLATES = {
    # SmolLM2-135M-Instruct (GGUF tokenizer.chat_template)
    "chatml-smollm2": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    # the same as the SmolLM2 GGUF stores it: raw line breaks inside the Jinja string literals
    "chatml-smollm2-raw": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}".replace("\\n", "\n"),
    # plain ChatML (no default system message)
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    # Meta-Llama-3-8B-Instruct
    "llama3": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    # Llama-2-7b-chat-hf
    "llama2": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    # Mistral-7B-Instruct-v0.1
    "mistral": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    # deepseek-llm-7b-chat (DeepSeek-V2-Chat and V2-Lite-Chat publish the same template)
    "deepseek": "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}",
    # deepseek-coder-6.7b-instruct (and 1.3b, 33b)
    "deepseek-coder": "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% endif %}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- if message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif -%}\n{%- endfor -%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science. For politically sensitive questions, security and privacy issues, and other non-computer science questions, you will refuse to answer\\n'}}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    {%- else %}\n        {%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}",
    # DeepSeek-V3 (DeepSeek-V2.5 and DeepSeek-Coder-V2 write the same turns)
    "deepseek3": "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is none %}{%- set ns.is_tool = false -%}{%- for tool in message['tool_calls']%}{%- if not ns.is_first %}{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{%- set ns.is_first = true -%}{%- else %}{{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}{{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor %}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- set ns.is_tool = false -%}{%- else %}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endif %}{%- if message['role'] == 'tool' %}{%- set ns.is_tool = true -%}{%- if ns.is_output_first %}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- set ns.is_output_first = false %}{%- else %}{{'\\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<｜tool▁outputs▁end｜>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}",
    # zephyr-7b-beta
    "zephyr": "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
}

CONVERSATIONS = [
    (None, "What is the capital of France?"),
    ("You are terse.", "  Name three primes.\n"),
]

MULTI_TURN = [
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": " Hello. How can I help?\n"},
     {"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Good morning"},
     {"role": "assistant", "content": "Bonjour"}, {"role": "user", "content": " And good night? "}],
    [{"role": "user", "content": "  Hello "}, {"role": "assistant", "content": " Arr, hello! "},
     {"role": "user", "content": "Where is the gold?"}, {"role": "assistant", "content": "Buried.\n"},
     {"role": "user", "content": "Thanks\n"}],
    [{"role": "system", "content": "\nYou are a pirate. "}, {"role": "user", "content": "Hello"},
     {"role": "assistant", "content": "Arr"}, {"role": "user", "content": "Gold?"},
     {"role": "assistant", "content": " Buried "}, {"role": "user", "content": "Where?"}],
]

# The texts of bos_token and eos_token in each family's models (tokenizer_config.json).
LLAMA_TOKENS = ("<s>", "</s>")
DEEPSEEK_TOKENS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")
TOKENS = {
    "chatml-smollm2": ("", "<|im_end|>"),
    "chatml-smollm2-raw": ("", "<|im_end|>"),
    "chatml": ("", "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama2": LLAMA_TOKENS,
    "mistral": LLAMA_TOKENS,
    "deepseek": DEEPSEEK_TOKENS,
    "deepseek-coder": DEEPSEEK_TOKENS[:1] + ("<|EOT|>",),
    "deepseek3": DEEPSEEK_TOKENS,
    "zephyr": LLAMA_TOKENS,
}

def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def render(tmpl, name, msgs):
    """The template's text for msgs with the assistant's turn opened, without the
    leading BOS that the engine's tokenizer adds."""
    bos, eos = TOKENS[name]
    text = tmpl.render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos)
    return text[len(bos):] if bos and text.startswith(bos) else text


def c_str(s):
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append("\\%03o" % ch)
    return '"' + "".join(out) + '"'


def main():
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    rows = []
    for name, src in TEMPLATES.items():
        tmpl = env.from_string(src)
        for system, user in CONVERSATIONS:
            if name == "mistral" and system is not None:
                continue  # the template refuses a system role
            msgs = ([{"role": "system", "content": system}] if system is not None else []) + [
                {"role": "user", "content": user}]
            rows.append((name, src, system, user, render(tmpl, name, msgs)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_cases.inc")
    with open(path, "w") as f:
        f.write("/* Generated by tests/data/gen_chat_cases.py (Jinja2 %s): do not edit. */\n" % jinja2.__version__)
        for name, src, system, user, text in rows:
            f.write("{%s,\n %s,\n %s, %s,\n %s},\n" % (c_str(name), c_str(src),
                                                       "NULL" if system is None else c_str(system), c_str(user),
                                                       c_str(text)))
    print("wrote", path, len(rows), "cases")
    # conversations of several turns
    multi = []
    for name, src in TEMPLATES.items():
        tmpl = env.from_string(src)
        for msgs in MULTI_TURN:
            if name == "mistral" and msgs[0]["role"] == "system":
                continue  # the template refuses a system role
            multi.append((name, src, msgs, render(tmpl, name, msgs)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_multi_cases.inc")
    with open(path, "w") as f:
        f.write("/* Generated by tests/data/gen_chat_cases.py (Jinja2 %s): do not edit. */\n" % jinja2.__version__)
        for name, src, msgs, text in multi:
            f.write("{%s,\n %s,\n %d, {%s},\n %s},\n" % (
                c_str(name), c_str(src), len(msgs),
                ", ".join("{%s, %s}" % (c_str(m["role"]), c_str(m["content"])) for m in msgs), c_str(text)))
    print("wrote", path, len(multi), "cases")


if __name__ == "__main__":
    main()
