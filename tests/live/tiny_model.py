"""A tiny GGUF model for the live lane, written at test time with the ``gguf`` package (no
weights are downloaded anywhere): one llama layer over the GPT-2 vocabulary of llama.cpp's
own tree, steered rather than trained.

* The embedding of each token in the chain below is one-hot, and the output matrix maps it to
  its successor: after the prompt's last newline the model says ``Hello! I am a tiny test
  model.`` and ends.
* One attention head looks for the token ``tool`` anywhere in the prompt (only the tools'
  rendering puts it there under Qwen2.5's template) and, when it is there, raises
  ``<tool_call>`` at the prompt's end, so that with tools offered the model opens a call in
  the Hermes format (``<tool_call>\\n{...}``, the rest constrained by llama-server's grammar).

The context length is 262144: agents' requests are 7-33k tokens in this vocabulary, and the
model's ``n_ctx_train`` caps the server's context.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import numpy as np
from gguf import GGUFReader, GGUFWriter

CONTEXT: Final = 262144
EMBED: Final = 64
HEADS: Final = 4
FEED_FORWARD: Final = 128
END: Final = "<|endoftext|>"
# the GPT-2 tokens (Ġ is a leading space, Ċ a newline) and the logit of each successor
CHAIN: Final = [
    ("Ċ", [("Hello", 20.0), (END, 13.0)]),
    ("Hello", [("!", 20.0)]),
    ("!", [("ĠI", 20.0)]),
    ("ĠI", [("Ġam", 20.0)]),
    ("Ġam", [("Ġa", 20.0)]),
    ("Ġa", [("Ġtiny", 20.0)]),
    ("Ġtiny", [("Ġtest", 20.0)]),
    ("Ġtest", [("Ġmodel", 20.0)]),
    ("Ġmodel", [(".", 20.0)]),
    (".", [(END, 20.0)]),
    ("<", [("tool", 20.0)]),
    ("</", [("tool", 20.0)]),
    ("tool", [("_", 20.0)]),
    ("_", [("call", 20.0)]),
    ("call", [(">", 20.0)]),
    (">", [("Ċ", 20.0)]),
]
QUERY: Final = "Ċ"  # the prompt's last token, where the head reads the flag
FLAG: Final = "tool"  # in the prompt only when tools are rendered
FLAGGED: Final = {"<": 22.0, END: 22.0, "Hello": 21.0}  # logits at the query with the flag on


def _strings(reader: GGUFReader, key: str) -> list[str]:
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def write_model(vocab: Path, out: Path) -> Path:
    reader = GGUFReader(vocab)
    tokens = _strings(reader, "tokenizer.ggml.tokens")
    merges = _strings(reader, "tokenizer.ggml.merges")
    types_field = reader.fields["tokenizer.ggml.token_type"]
    token_types = [int(types_field.parts[i][0]) for i in types_field.data]
    index = {token: i for i, token in enumerate(tokens)}
    end = index[END]
    rng = np.random.default_rng(1234)
    n_vocab = len(tokens)
    chain = {index[a]: [(index[b], logit) for b, logit in successors] for a, successors in CHAIN}
    k = len(chain)
    flag_dim = k  # the residual dimension the head writes when the prompt holds the flag
    embedding = np.zeros((n_vocab, EMBED), dtype=np.float32)
    embedding[:, k + 1 :] = rng.standard_normal((n_vocab, EMBED - k - 1))
    output = (rng.standard_normal((n_vocab, EMBED)) * 0.01).astype(np.float32)
    output[:, : k + 1] = 0.0
    scale = np.sqrt(EMBED)  # the RMS norm of a one-hot row is sqrt(EMBED) in its dimension
    for dim, (token, successors) in enumerate(chain.items()):
        embedding[token, :] = 0.0
        embedding[token, dim] = 1.0
        for successor, logit in successors:
            output[successor, dim] = logit / scale
    # with the flag on, the query's logits are sq * (output[:, query] + output[:, flag_dim])
    sq = np.sqrt(EMBED / 2.0)
    order = list(chain)
    query, flag = order.index(index[QUERY]), order.index(index[FLAG])
    base = dict(chain[index[QUERY]])
    for name, total in FLAGGED.items():
        output[index[name], flag_dim] = total / sq - base.get(index[name], 0.0) / scale
    head_dim = EMBED // HEADS
    pair = 14  # a low-frequency RoPE pair of head 0 (freq_base 1e12: about no rotation)
    weight = np.sqrt(20.0 * np.sqrt(head_dim) / EMBED)  # attention score query -> flag = 20
    wq = np.zeros((EMBED, EMBED), np.float32)
    wk = np.zeros((EMBED, EMBED), np.float32)
    wv = np.zeros((EMBED, EMBED), np.float32)
    wo = np.zeros((EMBED, EMBED), np.float32)
    wq[pair, query] = weight
    wk[pair, flag] = weight
    wv[pair, flag] = 1.0
    wo[flag_dim, pair] = 1.0 / scale

    writer = GGUFWriter(str(out), "llama")
    writer.add_name("toolcall-proxy-tiny")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(1e12)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(end)
    writer.add_eos_token_id(end)

    def tensor(name: str, value: np.ndarray) -> None:
        writer.add_tensor(name, np.ascontiguousarray(value, dtype=np.float32))

    def small(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensor("token_embd.weight", embedding)
    tensor("output_norm.weight", np.ones(EMBED, np.float32))
    tensor("output.weight", output)
    tensor("blk.0.attn_norm.weight", np.ones(EMBED, np.float32))
    tensor("blk.0.attn_q.weight", wq)
    tensor("blk.0.attn_k.weight", wk)
    tensor("blk.0.attn_v.weight", wv)
    tensor("blk.0.attn_output.weight", wo)
    tensor("blk.0.ffn_norm.weight", np.ones(EMBED, np.float32))
    tensor("blk.0.ffn_gate.weight", small(FEED_FORWARD, EMBED))
    tensor("blk.0.ffn_up.weight", small(FEED_FORWARD, EMBED))
    tensor("blk.0.ffn_down.weight", np.zeros((EMBED, FEED_FORWARD), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


if __name__ == "__main__":
    write_model(Path(sys.argv[1]), Path(sys.argv[2]))
