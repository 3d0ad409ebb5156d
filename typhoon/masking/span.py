"""SpanBERT-style span masking (Joshi et al., 2020), word-aligned and vectorized over the batch.

The law
-------
Span lengths, in words, follow a geometric law Geometric(0.2) clipped at 10 words. As in the
SpanBERT implementation, "clipped" means *truncated and renormalised* on {1, ..., 10}:
P(l) = g (1-g)^(l-1) / (1 - (1-g)^10), mean 3.8 words for g = 0.2 (the value the paper reports).
A span starts at a word chosen uniformly among the row's words and covers whole words only.

Filling the budget (per row)
----------------------------
Spans are placed one after another until the row's token budget b = rate x #maskable tokens is
spent, SpanBERT's sequential loop, computed without a loop over spans:

1. draw K candidate spans per row at once (K is a bound on the spans any row can need, see
   :func:`_n_candidates`);
2. every word gets the index of the first candidate covering it; ordering words by (that index,
   position) lists them in the order the sequential loop would add them (overlapping spans merge,
   only new words count);
3. the masked words are the prefix of that order whose token count fits in b. The word that would
   cross b is masked with probability (b - tokens before it) / its tokens, so the expected number of
   masked tokens is b exactly (no systematic under- or over-shoot) and no word is ever split.

Differences from SpanBERT, documented on purpose: a span starting inside an already masked region
is not rejected but merges (its new words count), and in the rare event that K candidates do not
reach the budget (only plausible for rates near 1) the remaining words are taken left to right.
Spans may cross the [SEP] between the two sentences of a pair (word ids continue across it).
"""

from __future__ import annotations

import math

import torch

from typhoon.masking.params import CORRUPTION, GEOMETRIC, MAX_SPAN, STRATEGY_PARAMS, P

from .base import MaskingStrategy, word_ids_of

CANDIDATE_OVERSAMPLING = 2.5  # candidate spans drawn per span expected to be needed


def span_length_pmf(geometric_p: float = GEOMETRIC.default, max_span: int = MAX_SPAN.default) -> torch.Tensor:
    """Float64 (max_span,): P(length = 1..max_span), the geometric law truncated and renormalised."""
    lengths = torch.arange(1, max_span + 1, dtype=torch.float64)
    pmf = geometric_p * (1 - geometric_p) ** (lengths - 1)
    return pmf / pmf.sum()


def sample_span_lengths(shape: tuple[int, ...], generator: torch.Generator,
                        geometric_p: float = GEOMETRIC.default, max_span: int = MAX_SPAN.default,
                        device: torch.device | str = "cpu") -> torch.Tensor:
    """Long tensor of span lengths in words, i.i.d. from :func:`span_length_pmf`.

    Closed-form inverse CDF of the truncated geometric law: with q = 1 - g and u ~ U[0, 1),
    l = 1 + floor(log(1 - u (1 - q^max)) / log q), so P(l) = g q^(l-1) / (1 - q^max) on 1..max.
    """
    u = torch.rand(shape, generator=generator, device=device, dtype=torch.float64)
    if geometric_p >= 1.0:
        return torch.ones(shape, dtype=torch.long, device=device)
    log_q = math.log1p(-geometric_p)
    mass = -math.expm1(max_span * log_q)  # 1 - q^max: the probability kept by the truncation
    lengths = torch.floor(torch.log1p(-u * mass) / log_q).long() + 1
    return lengths.clamp(1, max_span)


def _n_candidates(budget_words: torch.Tensor, mean_span: float) -> int:
    """How many candidate spans to draw per row: generous for the row needing the most words."""
    most = float(budget_words.max().item()) if budget_words.numel() else 0.0
    return int(math.ceil(CANDIDATE_OVERSAMPLING * most / mean_span)) + 4


def _first_covering_span(starts: torch.Tensor, lengths: torch.Tensor, n_slots: int, max_span: int) -> torch.Tensor:
    """Long (B, n_slots): index of the first candidate span covering each word (K if none).

    Scatters each candidate's index onto the (at most ``max_span``) words it covers with an
    ``amin`` reduction: B x K x max_span work, independent of the row length.
    """
    n_rows, n_cand = starts.shape
    offset = torch.arange(max_span, device=starts.device)
    positions = starts[:, :, None] + offset  # (B, K, max_span)
    sink = n_slots + max_span  # one column past every real word: collects the unused offsets
    positions = torch.where(offset < lengths[:, :, None], positions, sink).clamp(max=sink)
    span_index = torch.arange(n_cand, device=starts.device)[None, :, None].expand_as(positions)
    first = torch.full((n_rows, sink + 1), n_cand, dtype=torch.long, device=starts.device)
    first.scatter_reduce_(1, positions.reshape(n_rows, -1), span_index.reshape(n_rows, -1), reduce="amin")
    return first[:, :n_slots]


def span_mask(word_ids: torch.Tensor, maskable: torch.Tensor, rates: torch.Tensor, generator: torch.Generator,
              geometric_p: float = GEOMETRIC.default, max_span: int = MAX_SPAN.default) -> torch.Tensor:
    """Bool (B, L): whole-word spans filling each row's token budget (see the module docstring)."""
    device = word_ids.device
    has_word = maskable & (word_ids >= 0)
    n_rows = word_ids.shape[0]
    n_slots = int(word_ids.max().item()) + 1 if word_ids.numel() else 0
    if n_slots <= 0:
        return torch.zeros_like(maskable)
    safe_ids = word_ids.clamp(min=0)
    tokens_per_word = torch.zeros((n_rows, n_slots), dtype=torch.long, device=device)
    tokens_per_word.scatter_add_(1, safe_ids, has_word.long())
    n_words = torch.where(has_word, word_ids, -1).amax(dim=1) + 1  # (B,), 0 for empty rows (amax: no index)
    budget = rates.double() * has_word.sum(dim=1).double()  # tokens to mask per row (real-valued)

    mean_span = float((span_length_pmf(geometric_p, max_span)
                       * torch.arange(1, max_span + 1, dtype=torch.float64)).sum())
    n_cand = _n_candidates(rates.double() * n_words.double(), mean_span)
    starts = (torch.rand((n_rows, n_cand), generator=generator, device=device, dtype=torch.float64)
              * n_words[:, None]).long()
    lengths = sample_span_lengths((n_rows, n_cand), generator, geometric_p, max_span, device=device)

    # spans may run past the row's last word: those words have no tokens and are never counted
    first_cover = _first_covering_span(starts, lengths, n_slots, max_span)  # (B, W), n_cand if uncovered
    word = torch.arange(n_slots, device=device)
    order = torch.argsort(first_cover * n_slots + word[None, :], dim=1)  # the sequential loop's order

    ordered_tokens = tokens_per_word.gather(1, order).double()
    after = ordered_tokens.cumsum(dim=1)
    before = after - ordered_tokens
    fits = after <= budget[:, None]
    crosses = (before < budget[:, None]) & ~fits
    keep_crossing = torch.rand(order.shape, generator=generator, device=device, dtype=torch.float64) \
        < (budget[:, None] - before) / ordered_tokens.clamp(min=1)
    take = fits | (crosses & keep_crossing)

    word_selected = torch.zeros_like(take).scatter_(1, order, take)
    return word_selected.gather(1, safe_ids) & has_word


class SpanMasking(MaskingStrategy):
    """SpanBERT span masking: word-aligned spans, lengths ~ truncated Geometric(0.2) <= 10 words."""

    name = "span"
    PARAMS = STRATEGY_PARAMS["span"]  # declared in typhoon.masking.params

    def __init__(self, p: float = P.default, corruption: str = CORRUPTION.default,
                 geometric_p: float = GEOMETRIC.default, max_span: int = MAX_SPAN.default):  # declared in params
        super().__init__(p=p, corruption=corruption)
        self.geometric_p = GEOMETRIC.check(geometric_p)
        self.max_span = MAX_SPAN.check(max_span)

    def _select(self, batch, maskable, rates, generator):
        return span_mask(word_ids_of(batch, self.name), maskable, rates, generator, self.geometric_p,
                         self.max_span)
