"""typhoon.report.masking_walkthrough: token tables, selection HTML, rate tables and the saliency demo (and their figures)."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
import torch

from typhoon import machine
from typhoon.data.batching import collate
from typhoon.masking import kl_to_uniform, maskable_positions
from typhoon.report import masking_figures


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread is quicker. Restored after the module, not set at import: collection imports
    every test file in every worker, and the count would stay for all their tests."""
    with machine.torch_threads(1):
        yield


# --------------------------------------------------------------------------------------------------
# Token table


def test_token_table_single_sentence_matches_tokenizer(cola_tokenized, tokenizer):
    from typhoon.report import masking_walkthrough as W
    example = cola_tokenized["train"][3]
    table = W.token_table(example, tokenizer)
    enc = tokenizer(example["sentence"], truncation=True, max_length=128)
    assert table["token"].tolist() == tokenizer.convert_ids_to_tokens(enc["input_ids"])
    assert table["word_id"].tolist() == [-1 if w is None else w for w in enc.word_ids()]
    assert table["special"].tolist() == [w is None for w in enc.word_ids()]
    assert table["token"][table["special"]].tolist() == ["[CLS]", "[SEP]"]


def test_token_table_pair_continues_word_ids(mrpc_tokenized, tokenizer):
    from typhoon.report import masking_walkthrough as W
    example = mrpc_tokenized["train"][0]
    table = W.token_table(example, tokenizer)
    enc = tokenizer(example["sentence1"], example["sentence2"], truncation=True, max_length=128)
    words, sequences = enc.word_ids(), enc.sequence_ids()
    n_first = max(w for w, s in zip(words, sequences, strict=True) if s == 0) + 1
    expected = [-1 if w is None else w + (n_first if s == 1 else 0) for w, s in zip(words, sequences, strict=True)]
    assert table["word_id"].tolist() == expected
    assert table["segment"].tolist() == enc["token_type_ids"]
    real = table[~table["special"]]
    assert real["word_id"].is_monotonic_increasing and real["word_id"].min() == 0


# --------------------------------------------------------------------------------------------------
# Selection HTML


class _Spans(HTMLParser):
    """Collect, per strategy row, the (text, selected) pairs of its token spans."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[tuple[str, bool]]] = {}
        self._row = self._span = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-strategy" in attrs:
            self._row = self.rows.setdefault(attrs["data-strategy"], [])
        elif tag == "span" and self._row is not None:
            self._span = [attrs["data-selected"] == "1", ""]

    def handle_data(self, data):
        if self._span is not None:
            self._span[1] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._span is not None:
            self._row.append((self._span[1], self._span[0]))
            self._span = None


def test_selection_html_marks_exactly_the_selected_tokens(mrpc_tokenized, tokenizer):
    from typhoon.report import masking_walkthrough as W
    examples = [mrpc_tokenized["train"][i] for i in range(8)]
    batch = collate(examples, tokenizer.pad_token_id)
    row_index = int(batch["attention_mask"].sum(1).argmin())  # the shortest row: it has padding
    strategies = W.prepared_strategies(["random", "whole_word", "span"], examples, len(tokenizer), p=0.3)
    selections = W.draw_selections(strategies, batch, torch.Generator().manual_seed(3))
    row = W.batch_row(batch, row_index)
    chosen = {name: sel[row_index] for name, sel in selections.items()}
    chosen["<none>"] = torch.zeros_like(chosen["random"])

    parser = _Spans()
    parser.feed(W.selection_html(row, chosen, tokenizer))
    n_real = int(row["attention_mask"].sum())
    assert n_real < row["input_ids"].numel()  # the row really has padding, which must not be shown
    tokens = tokenizer.convert_ids_to_tokens(row["input_ids"][:n_real].tolist())
    assert set(parser.rows) == set(chosen)
    for name, selected in chosen.items():
        assert parser.rows[name] == list(zip(tokens, selected[:n_real].tolist(), strict=True)), name
    assert sum(s for _, s in parser.rows["random"]) > 0
    assert not any(s for _, s in parser.rows["<none>"])


def test_selection_html_escapes_and_checks_length(tokenizer, mrpc_batch):
    from typhoon.report import masking_walkthrough as W
    row = W.batch_row(mrpc_batch, 0)
    with pytest.raises(ValueError, match="positions"):
        W.selection_html(row, {"random": torch.zeros(3, dtype=torch.bool)}, tokenizer)
    out = W.selection_html(row, {"<b>": torch.zeros_like(row["input_ids"], dtype=torch.bool)}, tokenizer)
    assert "<b>" not in out and "&lt;b&gt;" in out


# --------------------------------------------------------------------------------------------------
# Rates


@pytest.mark.parametrize("p", [0.15, 0.4])
def test_rate_table_rates_near_p(mrpc_tokenized, tokenizer, p):
    from typhoon.report import masking_walkthrough as W
    examples = [mrpc_tokenized["train"][i] for i in range(64)]
    batch = collate(examples[:32], tokenizer.pad_token_id)
    names = ["random", "whole_word", "span", "typhoon"]
    strategies = W.prepared_strategies(names, examples, len(tokenizer), p=p)
    table = W.rate_table(strategies, batch, draws=60, generator=torch.Generator().manual_seed(0)).set_index("strategy")
    assert list(table.index) == names
    assert (table["p"] == p).all() and (table["draws"] == 60).all()
    assert ((table["mean_rate"] - p).abs() < 5 * table["se"] + 1e-3).all(), table
    assert table.loc["whole_word", "split_word_share"] == 0 and table.loc["span", "split_word_share"] == 0
    assert table.loc["random", "split_word_share"] > 0.5  # a touched multi-piece word is usually split
    assert table.loc["span", "sd_rate"] < table.loc["random", "sd_rate"]  # span fills each row's budget


def test_rate_table_counts_maskable_tokens_only(mrpc_batch, tokenizer):
    from typhoon.report import masking_walkthrough as W
    class Everything:  # selects every position, special and padding included, without the base class filter
        name, p = "everything", 1.0

        def select(self, batch, generator):
            return torch.ones_like(batch["input_ids"], dtype=torch.bool) & maskable_positions(batch)

    table = W.rate_table([Everything()], mrpc_batch, draws=2, generator=torch.Generator())
    assert table.loc[0, "strategy"] == "everything" and table.loc[0, "mean_rate"] == 1.0
    assert table.loc[0, "split_word_share"] == 0.0
    with pytest.raises(ValueError, match="draws"):
        W.rate_table([Everything()], mrpc_batch, draws=1, generator=torch.Generator())


# --------------------------------------------------------------------------------------------------
# Saliency demo


@pytest.fixture(scope="module")
def demo():
    from typhoon.report import masking_walkthrough as W
    return W.saliency_demo("tiny-random", "mrpc", steps=2, seed=0, batch_size=8, max_length=48, example=1)


@pytest.mark.slow  # trains Typhoon for the demo
def test_saliency_demo_trains_typhoon_and_explains_one_sentence(demo, tokenizer):
    strategy, tokens = demo.strategy, demo.tokens
    train_rows = demo.mlm_loss[demo.mlm_loss.split == "train"]
    assert strategy.needs_saliency and strategy.steps == len(train_rows) == 2  # update ran once per step
    assert demo.diagnostics["steps"] == 2
    assert tokens["token_id"].tolist() == demo.example["input_ids"]
    assert tokens["token_id"].tolist() == demo.batch["input_ids"][0].tolist()
    special = tokens["special"].to_numpy()
    assert tokens["selected"].any() and not tokens.loc[special, "selected"].any()
    assert np.isfinite(tokens["saliency"]).all()
    # masked positions carry the loss: their saliency dominates the visible ones'
    assert tokens.loc[tokens.selected, "saliency"].abs().max() > tokens.loc[~tokens.selected, "saliency"].abs().max()
    pi = tokens["pi"].to_numpy()
    assert np.isnan(pi[special]).all() and ((pi[~special] > 0) & (pi[~special] < 1)).all()
    np.testing.assert_allclose(pi[~special], strategy.probs[tokens["token_id"][~special]])
    seen = strategy.seen[tokens["token_id"]] & ~special
    assert np.isfinite(tokens["weight"][seen]).all() and tokens["weight"][~seen].isna().all()
    assert (tokens["count"][~special] > 0).all()  # a training sentence: every type was counted


def test_saliency_demo_kl_moves_away_from_uniform(demo):
    strategy, d = demo.strategy, demo.diagnostics
    assert d["kl_to_uniform"] == pytest.approx(kl_to_uniform(strategy.probs, strategy.counts, strategy.p))
    assert 0 < d["kl_to_uniform"] < 0.05  # moved, but the calibration band keeps it close to uniform
    assert d["spread_ratio"] <= 1 / (1 - strategy.delta) + 1e-9
    # the budget is still p in expectation over the corpus
    assert (strategy.probs * strategy.counts).sum() / strategy.counts.sum() == pytest.approx(strategy.p)


def test_saliency_demo_rejects_an_example_outside_the_training_slice():
    from typhoon.report import masking_walkthrough as W
    with pytest.raises(ValueError, match="example"):
        W.saliency_demo("tiny-random", "mrpc", steps=1, batch_size=4, example=4)


def test_plots_write_png_and_svg(demo, tmp_path, mrpc_batch, mrpc_tokenized, tokenizer):
    from typhoon.report import masking_walkthrough as W
    paths = masking_figures.plot_saliency(demo.tokens, demo.strategy.p, tmp_path / "saliency")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in paths)
    examples = [mrpc_tokenized["train"][i] for i in range(32)]
    tables = [W.rate_table(W.prepared_strategies(["random", "span"], examples, len(tokenizer), p=p), mrpc_batch,
                           draws=3, generator=torch.Generator().manual_seed(0)) for p in (0.1, 0.3)]
    paths = masking_figures.plot_rates(pd.concat(tables, ignore_index=True), tmp_path / "rates.png")
    assert [p.name for p in paths] == ["rates.png", "rates.svg"] and all(p.stat().st_size > 0 for p in paths)
