"""The kl-original study's registered design (issue 49): the paper's 2023 code's calibration rules, one at a
time and together, and its long MLM phase, measured against this package's Typhoon under every definition of
the KL (:mod:`typhoon.analysis.kl.units`).

The 2023 code is ``man2machine/cs324-final-project-2023`` (HEAD 20d17a2), class
``TyphoonMaskedLanguageModelTrainer`` of ``cs324_project/masking.py``. Where its rules differ from this
package's, each is a parameter of Typhoon (:mod:`typhoon.masking.params`: ``ema_start``, ``unseen``,
``budget``; all three at once: the strategy ``typhoon_2023``), and each is a row here:

- its defaults: budget p 0.3 (δ 0.4 and the EMA rate 0.8 on the new estimate are this package's too);
- its EMA starts at zeros: a type first seen after the first step gets 0.8 x its estimate;
- min-max over the updated types, the never-updated ones (the special tokens among them) at the top of the band;
- its budget: beta = p N / sum b c over every input id, specials included, in closed form; the specials are
  never masked, so the realised rate falls below p;
- its MLM phase: mask-only corruption, batch 16, learning rate 1e-4 with no warm-up, and 100 epochs on MRPC,
  80 on CoLA (``scripts/results/*/run_training_typhoon.ipynb``).

Light (no torch, numpy or pandas): the command line checks names with it. The runs are
:mod:`typhoon.studies.kl_original.policy`', the tables those of the study's own modules (rows, curve, finetune,
verdicts, as_measured, second_addendum, report).
"""

from __future__ import annotations

from dataclasses import dataclass

from typhoon.studies.kl_gap.design import Cause, named

BACKBONE = "minilm-l6-mlm"  # the masked LM that models language (the paper's backbones were such models)
PROFILE = "cpu"  # the baseline is this profile's Typhoon cell
TASKS = ("mrpc", "cola")
SEEDS = (0, 1, 2)

RECIPE_2023 = {"batch_size": 16, "mlm_lr": 1e-4, "warmup_ratio": 0.0}  # the 2023 MLM phase (HF Trainer defaults)
ALL_2023 = {"strategy": "typhoon_2023", "p": 0.3, "corruption": "mask_only", **RECIPE_2023}

ROWS: tuple[Cause, ...] = (
    Cause("baseline", "this package's Typhoon: the cpu profile's cell on minilm-l6-mlm (p 0.15, EMA from a type's "
          "first sighting, never-seen types at the band's midpoint, an exact budget over the non-special tokens, "
          "80/10/10 corruption, batch 32, learning rate 5e-5 with 10 % warm-up), 1 MLM epoch"),
    Cause("p", "budget p 0.3, the 2023 code's default, in place of 0.15", {"p": 0.3}),
    Cause("ema_start", "every weight's EMA starts at 0: a type first seen after the first step gets 0.8 x its "
          "estimate", {"ema_start": "zeros"}),
    Cause("unseen", "types never updated (the special tokens among them) at the top of the band, not its midpoint",
          {"unseen": "top"}),
    Cause("budget", "beta = p N / sum b c over every input id, specials included, no water-filling; the specials "
          "are never masked, so the realised rate falls below p", {"budget": "all_ids"}),
    Cause("corruption", "mask-only corruption in place of 80/10/10", {"corruption": "mask_only"}),
    Cause("recipe", "the 2023 MLM recipe: batch 16, learning rate 1e-4, no warm-up", dict(RECIPE_2023)),
    Cause("all", "every row above at once: the strategy typhoon_2023 at p 0.3, mask-only, the 2023 recipe",
          dict(ALL_2023)),
    # Registered after the eight rows above had their states and before any state of these four (ADDENDUM): the
    # 2023 run's other differences. It ran in fp32, so the two rows of its data pipeline are measured in fp32
    # too, against the fp32 'all' (whatever precision `auto` picks on the machine that runs the study).
    Cause("numerics", "'all' in fp32 (saliency and training), as the 2023 code ran, in place of the bf16 autocast "
          "that precision 'auto' picks on a CPU with bf16 kernels", {**ALL_2023, "precision": "fp32"}),
    Cause("sampler", "'numerics' with the 2023 code's data order: batches of a plain shuffle (transformers' "
          "RandomSampler), not grouped by length", {**ALL_2023, "precision": "fp32", "batch_order": "random"}),
    Cause("max_length", "'numerics' with the 2023 code's max_length 512 in place of 128",
          {**ALL_2023, "precision": "fp32", "max_length": 512}),
    Cause("all_plus", "every 2023 rule: 'all' in fp32, random batches and max_length 512",
          {**ALL_2023, "precision": "fp32", "batch_order": "random", "max_length": 512}),
)
#: The rows of the addendum, each compared with the row it changes (and, as every row, with the baseline): its
#: own Bonferroni family of 4, so that the first eight rows keep the family of 7 they were registered with.
ADDENDUM_AGAINST = {"numerics": "all", "sampler": "numerics", "max_length": "numerics", "all_plus": "all"}
#: Each row's Bonferroni family (the rows' change against the baseline): the 7 first rows beside the baseline,
#: or the addendum's 4.
BONFERRONI_FAMILY = {row.name: len(ADDENDUM_AGAINST) if row.name in ADDENDUM_AGAINST else len(ROWS) - 1 - len(ADDENDUM_AGAINST)
                     for row in ROWS}

#: The curve: the 'all' row over the 2023 code's number of MLM epochs, the learning rate decaying over all of
#: them as there; its KL after every epoch, a full state at these epochs (and at the last one reached).
CURVE_ROW = "all"
CURVE_EPOCHS = {"mrpc": 100, "cola": 80}
SNAPSHOT_EPOCHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100)
TRACE_EVERY = 10  # the KL within an epoch, every this many steps: how much a snapshot's timing moves it


@dataclass(frozen=True)
class Curve:
    """A curve of the study: a row's long MLM phase (:data:`CURVE_EPOCHS`), each of its runs (task x seed) in
    ``<folder>/<task>/seed<k>/``. ``device``: the kind of device its numerics are registered on (None: any)."""

    name: str
    row: str
    folder: str
    device: str | None
    registered: str  # with what it was registered: the hypothesis or an addendum

    def state_name(self, task: str, seed: int) -> str:
        """The file name of a run's resume state in a checkpoint folder (the registered curve's as before)."""
        return f"{'' if self.name == CURVE_ROW else self.name + '-'}{task}-seed{seed}.resume.pt"


#: Every curve: the registered one and the second addendum's two (SECOND_ADDENDUM). The registered curve ran on
#: a CPU to 42 (MRPC) / 45-46 (CoLA) epochs; its resume states were not kept, so it goes on nowhere.
CURVES = {
    "all": Curve("all", "all", "curve", None, "the hypothesis"),
    "all_plus": Curve("all_plus", "all_plus", "curve_all_plus", None, "the second addendum"),
    "all_gpu": Curve("all_gpu", "all", "curve_all_gpu", "cuda", "the second addendum"),
}

#: The fine-tuned question: typhoon_2023 against random under the same 2023 phase 1 (1 MLM epoch), fine-tuned
#: as the cpu profile's cells (at batch 16: one batch size serves both phases).
FINETUNE_STRATEGIES = ("random", "random_2023", "typhoon_2023")
#: Seeds per task of the fine-tuned comparison (ADDENDUM): the fewest pairs with which a paired TOST at the
#: decisive margins (+-0.01 F1, +-0.02 MCC), alpha 0.05 per comparison, has power >= 0.8 when the differences'
#: sd is the decisive-mlm design's planning sd of typhoon - random (0.0093 MRPC: 9 pairs, power 0.80; 0.0109
#: CoLA: 5 pairs, power 0.91; typhoon.analysis.paired.tost_power). A seed beyond them is refused.
FINETUNE_SEEDS = {"mrpc": tuple(range(9)), "cola": tuple(range(5))}
FINETUNE_SETTINGS = {"p": 0.3, "corruption": "mask_only", **RECIPE_2023}

HYPOTHESIS = (
    "Registered before any state of the study. Question: which of the 2023 code's rules, alone or together, "
    "and how many MLM epochs bring Typhoon's masking to the paper's 7e-4 nats/token, and under which definition "
    "of the KL (typhoon.analysis.kl_units: per-token Bernoulli against the realised rate or against p, KL(q||u) "
    "of the masked tokens, their sums per sequence; nats and bits)? Design: minilm-l6-mlm, MRPC and CoLA x seeds "
    "0-2, the MLM phase alone; one row per rule at 1 MLM epoch, and the 'all' row as a curve over the 2023 "
    "code's 100 (MRPC) and 80 (CoLA) epochs, its KL after every epoch, as many epochs as the CPU allows. "
    "Predictions: (1) p 0.3 raises the per-token Bernoulli KL about (0.3/0.7)/(0.15/0.85) = 2.4x and leaves "
    "KL(q||u) unchanged; (2) the all_ids budget puts the realised rate below p, so the KL against p exceeds the KL "
    "against the realised rate; (3) 'unseen' and 'ema_start' alone move the KL at the end of an epoch by less "
    "than 2x either way (every type of the text is seen within the epoch); (4) no row at 1 epoch reaches 7e-4 "
    "under the per-token Bernoulli KL; (5) along the curve the KL rises with the epochs. Tests: per row and "
    "definition, each (task, seed) state paired with the baseline's of the same task and seed, the 95 % t "
    "interval of the mean log ratio (unadjusted; Bonferroni over the 7 rows beside it) says whether the row "
    "raises, lowers or leaves the KL. A row 'reaches 7e-4' under a definition when the 95 % t interval of its "
    "geometric-mean KL over the 6 states contains 7e-4, and 'is within 3x' when the interval lies inside "
    "[7e-4/3, 3 x 7e-4] (the KL-gap study's criterion). Curve: the paired log ratio of the last epoch all six "
    "runs reached to epoch 1, a 95 % t interval over the six. Fine-tuned: typhoon_2023 against random under the "
    "same 2023 phase 1 (1 MLM epoch), fine-tuned as the cpu profile's cells at batch 16, seeds 0-2 per task: "
    "the paired difference of the dev metric with its 95 % t interval, and TOST at the decisive design's margins "
    "(+-0.01 F1 on MRPC, +-0.02 MCC on CoLA), with the power those 3 pairs have, stated beside the result."
)


ADDENDUM = (
    "Addendum, registered after the states of the first eight rows, of the curve to 42-46 epochs and of the "
    "fine-tuned seeds 0-2, and before any state of what it adds. (a) Four rows at 1 MLM epoch for the 2023 run's "
    "differences not yet measured: 'numerics' ('all' in fp32), 'sampler' ('numerics' with random batches), "
    "'max_length' ('numerics' at 512) and 'all_plus' (all of them). Each is compared, as every row, with the "
    "baseline, and with the row it changes (numerics and all_plus with 'all', sampler and max_length with "
    "'numerics'), per definition: the 95 % t interval of the mean paired log ratio over the 6 (task, seed) pairs, "
    "Bonferroni over these 4 rows (the first 7 keep their family of 7). Predictions: (6) fp32 moves the KL by "
    "less than 2x either way against 'all' (bf16 rounds each saliency to 3 digits; the EMA's last batches decide "
    "the state); (7) random batches move it by less than 2x against 'numerics'; (8) max_length 512 leaves every "
    "state bit-identical to 'numerics', and 'all_plus' to 'sampler': no training sequence reaches 128 tokens "
    "(the longest MRPC pair has 103, the longest CoLA sentence 47, with minilm-l6-mlm's tokenizer); (9) "
    "'all_plus' does not reach 7e-4 under the per-token Bernoulli KL. A ratio whose interval holds both "
    "x0.5 and x2 is 'not detected', not 'unchanged'. (b) The 2023 random arm, 'random_2023': the rate p drawn "
    "over every real position, [CLS] and [SEP] included (the 2023 collator's mask ignored the special-token "
    "mask). (c) The fine-tuned comparison: typhoon_2023 - random and typhoon_2023 - random_2023, under the same "
    "2023 phase 1, seeds 0-8 on MRPC and 0-4 on CoLA (FINETUNE_SEEDS: power >= 0.8 at the planning sd), each "
    "pair's arms on one machine; TOST at the decisive margins, alpha 0.05 per comparison (unadjusted; the 4 "
    "comparisons are also shown at Bonferroni alpha 0.0125), with the power at the planning and at the "
    "observed sd. A pair whose arms ran in different numerics is flagged, and the verdict given with and "
    "without such pairs. (d) The curve is read two ways: the registered end-of-epoch state (prediction 5), and, "
    "supplementary, the geometric mean of each epoch's trace snapshots."
)


SECOND_ADDENDUM = (
    "Second addendum, registered after every state of the first addendum and every fine-tuned pair, and before any "
    "state of the two curves it adds. (e) The 2023 recipe's curve, 'all_plus': the 'all_plus' row (every 2023 rule: "
    "'all' in fp32 with random batches and max_length 512) over the 2023 code's 100 (MRPC) / 80 (CoLA) MLM epochs, "
    "seeds 0-2 per task, its KL after every epoch and every TRACE_EVERY steps, full states at SNAPSHOT_EPOCHS "
    "(curve_all_plus/). The registered curve follows the 'all' row, whose batches are grouped by length; the 2023 "
    "run drew them at random, which raised the KL x2.6 at one epoch ('sampler', [95 % 1.3, 5.1], not detected at "
    "the Bonferroni level). (f) The registered 'all' curve again from epoch 0 on a GPU, 'all_gpu' (curve_all_gpu/): "
    "the same configs in the GPU's numerics (precision auto: bf16 autocast there, as on the CPU that ran the "
    "registered curve); its CPU runs stopped at 42-46 epochs and their resume states were not kept. Both run as "
    "one command on one GPU in about 10 minutes: the 12 runs at once, one slot each, each to its plan, stopped "
    "at the budget with every finished epoch kept; the runs not at their plan then are read where they stopped. "
    "Readings, as (d): the end-of-epoch state (registered) and the trace mean (supplementary), at the last epoch "
    "all six runs of a curve reached, named beside every reading. Predictions, each on the per-token Bernoulli KL "
    "at the end of each epoch: (10) along 'all_plus' the KL at the last common epoch is within 2x of epoch 1's "
    "(the 95 % t interval of the paired log ratio over the 6 runs within x0.5-x2); (11) 'all_plus' at its last "
    "common epoch does not reach 7e-4 (the 95 % t interval of the geometric mean over its 6 runs lies below "
    "7e-4); (12) the GPU's 'all' curve has the CPU one's level: per (task, seed), the mean log ratio GPU / CPU "
    "over the epochs both reached, its 95 % t interval over the 6 runs within x0.5-x2. Prediction 5 is read again "
    "on 'all_gpu', labelled as a reading on another machine's numerics. A reading short of the plan (100 / 80 "
    "epochs) is an interim one and says so."
)


def row_named(name: str) -> Cause:
    return named(ROWS, name, "row")


def curve_named(name: str) -> Curve:
    """A curve of :data:`CURVES` by name; ValueError naming the curves otherwise."""
    if name not in CURVES:
        raise ValueError(f"unknown curve {name!r}; the study's curves: {', '.join(CURVES)}")
    return CURVES[name]


def check_finetune_seeds(seeds, tasks) -> None:
    """ValueError naming the seeds the design allows when a fine-tuned seed is beyond every given task's."""
    allowed = sorted({seed for task in tasks for seed in FINETUNE_SEEDS[task]})
    beyond = sorted(set(seeds) - set(allowed))
    if beyond:
        raise ValueError(f"fine-tuned seed(s) {beyond} beyond the registered design: seeds "
                         + ", ".join(f"{task} {FINETUNE_SEEDS[task][0]}-{FINETUNE_SEEDS[task][-1]}" for task in tasks))
