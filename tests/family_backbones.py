"""Small random-init checkpoints of every supported family, each with a tokenizer of its family's kind.

Everything is built offline in seconds from MRPC training sentences (2000-token vocabularies): the
byte-level BPE tokenizers (RoBERTa, ModernBERT) are trained with the ``tokenizers`` library and wrapped
as the family's tokenizer class with its special tokens and pair template; DeBERTa-v3's SentencePiece
Unigram model is trained with ``sentencepiece`` and saved as the hub checkpoint has it (``spm.model``,
converted by transformers on load); BERT, DistilBERT and the ELECTRA generator use the bundled uncased
WordPiece vocabulary (MiniLM's), which is their real kind. Configs are tiny (hidden 32, 2-3 layers) but
keep what distinguishes each family: RoBERTa's single token type and padding-offset positions,
DeBERTa-v3's relative attention without absolute positions or token types, ModernBERT's alternating
global and sliding-window layers (a window shorter than the sentences) with dropout switched on,
ELECTRA's generator with embedding_size != hidden_size.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoModelForMaskedLM,
    BertConfig,
    DebertaV2Config,
    DebertaV2Tokenizer,
    DistilBertConfig,
    ElectraConfig,
    ModernBertConfig,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaTokenizer,
)

VOCAB = 2000
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _trained_model(tokenizer: Tokenizer, texts: list[str], trainer) -> dict:
    tokenizer.train_from_iterator(texts, trainer)
    return json.loads(tokenizer.to_str())["model"]


def byte_level_bpe(texts: list[str], special_tokens: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab, merges) of a GPT-2 style byte-level BPE (no prefix space) trained on ``texts``."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trained = _trained_model(bpe, texts, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=special_tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return trained["vocab"], [tuple(pair) for pair in trained["merges"]]


def roberta_tokenizer(texts: list[str]) -> RobertaTokenizer:
    vocab, merges = byte_level_bpe(texts, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])  # roberta-base's order
    return RobertaTokenizer(vocab=vocab, merges=merges)


def modernbert_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """ModernBERT's layout: byte-level BPE, [CLS] A [SEP] B [SEP], no token type ids."""
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab, merges = byte_level_bpe(texts, specials)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", pad_token="[PAD]", mask_token="[MASK]",
                                   model_input_names=["input_ids", "attention_mask"])


def deberta_v3_tokenizer(texts: list[str], folder: Path) -> DebertaV2Tokenizer:
    """DeBERTa-v3's hub layout, written to ``folder``: a SentencePiece Unigram ``spm.model`` with [PAD] [CLS]
    [SEP] [UNK] first and a tokenizer_config.json without a class name; transformers converts the model on
    load (with ``sentencepiece`` and ``protobuf``) and adds [MASK] after the pieces, as for deberta-v3-base."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=VOCAB, model_type="unigram",
        pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]",
        unk_piece="[UNK]", minloglevel=2)
    (folder / "spm.model").write_bytes(model.getvalue())
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "vocab_type": "spm"}))
    return DebertaV2Tokenizer.from_pretrained(folder)


def family_tokenizer(family: str, texts: list[str], wordpiece, folder: Path):
    """A fast tokenizer of the family's kind, saved to ``folder``; ``wordpiece`` is the bundled uncased one."""
    if family == "deberta-v2":
        return deberta_v3_tokenizer(texts, folder)
    builders = {"roberta": roberta_tokenizer, "modernbert": modernbert_tokenizer}
    tokenizer = builders[family](texts) if family in builders else wordpiece
    tokenizer.save_pretrained(folder)
    return tokenizer


def family_config(family: str, tokenizer, **overrides):
    """A tiny config of the family, sized to the tokenizer."""
    ids = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    if family == "bert":
        config = BertConfig(**ids, **SMALL)
    elif family == "distilbert":
        config = DistilBertConfig(**ids, dim=32, n_layers=2, n_heads=2, hidden_dim=64)
    elif family == "roberta":  # roberta-base: one token type, positions offset by the padding id
        config = RobertaConfig(**ids, **SMALL, type_vocab_size=1, max_position_embeddings=514,
                               bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    elif family == "deberta-v2":  # deberta-v3-base's attention settings
        config = DebertaV2Config(**ids, **SMALL, relative_attention=True, position_buckets=32,
                                 max_relative_positions=-1, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                                 norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=0, layer_norm_eps=1e-7)
    elif family == "modernbert":  # layers: global, sliding, sliding; a 16-token window; dropout on
        config = ModernBertConfig(**ids, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                  intermediate_size=64, global_attn_every_n_layers=3, local_attention=16,
                                  cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                                  bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                                  attention_dropout=0.1, mlp_dropout=0.1, embedding_dropout=0.1)
    elif family == "electra":  # a generator: narrower than its embeddings, as electra-*-generator
        config = ElectraConfig(**ids, embedding_size=32, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=32)
    else:
        raise ValueError(f"no test config for family {family!r}")
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def save_family_backbone(family: str, folder: Path, texts: list[str], wordpiece):
    """Build and save (safetensors + tokenizer files) a random-init *ForMaskedLM; returns (model, tokenizer).

    The caller seeds torch's global generator (transformers initialises weights from it).
    """
    tokenizer = family_tokenizer(family, texts, wordpiece, folder)
    model = AutoModelForMaskedLM.from_config(family_config(family, tokenizer))
    model.save_pretrained(folder)
    return model, tokenizer
