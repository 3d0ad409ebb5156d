"""The kl-original study's fine-tuned comparison (the addendum's (c)): typhoon_2023 against random and
against random_2023 (the 2023 random arm) under the same 2023 phase 1 (runs:
:class:`typhoon.studies.kl_original.policy.KlOriginalFinetune`), per task, paired by seed: the mean difference of the dev
metric with its 95 % t interval, TOST at the decisive design's margins at alpha 0.05 (unadjusted) and at the
Bonferroni alpha over the comparisons, the power at the planning and at the observed sd, the pairs landed
against the seeds registered (:data:`~typhoon.studies.kl_original.design.FINETUNE_SEEDS`), and the pairs whose
two arms ran in different numerics, with the verdict given without them too."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis import tost_power
from typhoon.studies.kl_original.design import FINETUNE_SEEDS, FINETUNE_STRATEGIES
from typhoon.studies.kl_original.rows import t_interval

TREATMENT = "typhoon_2023"
#: the arms typhoon_2023 is compared with: today's random and the 2023 code's
CONTROLS = tuple(s for s in FINETUNE_STRATEGIES if s != TREATMENT)
ALPHA = 0.05
#: the Bonferroni alpha over the 4 comparisons (2 tasks x 2 controls), shown beside the unadjusted verdict
ALPHA_BONFERRONI = ALPHA / (len(FINETUNE_SEEDS) * len(CONTROLS))
#: which pairs a verdict is given on: all those landed, or only those whose two arms share their numerics
ALL_PAIRS, SAME_NUMERICS = "all", "without mixed numerics"


def paired_verdict(diff, margin: float, planning_sd: float) -> dict:
    """The numbers of one comparison on the paired differences ``diff``: mean, 95 % t interval, sd, TOST p at
    ``margin`` and whether it is below alpha 0.05 and below the Bonferroni alpha, and the TOST's power at
    alpha 0.05 with these pairs at ``planning_sd`` and at the observed sd. One pair has no interval and no test
    (its power is 0: nothing can be declared on it)."""
    from typhoon.analysis import tost_paired

    diff = np.asarray(diff, float)
    mean, low, high = t_interval(diff)
    sd = float(np.std(diff, ddof=1)) if len(diff) > 1 else math.nan
    tost_p = tost_paired(diff, margin) if len(diff) > 1 else math.nan
    testable = math.isfinite(tost_p)
    return {"n_pairs": len(diff), "mean_diff": mean, "ci_low": low, "ci_high": high, "sd_diff": sd,
            "tost_p": tost_p, "equivalent": bool(tost_p < ALPHA) if testable else None,
            "equivalent_bonferroni": bool(tost_p < ALPHA_BONFERRONI) if testable else None,
            "power_at_planning_sd": tost_power(len(diff), planning_sd, margin) if len(diff) > 1 else 0.0,
            "power_at_observed_sd": tost_power(len(diff), sd, margin) if sd > 0 else math.nan}


def mixed_numerics(out: Path, runs: pd.DataFrame, control: str) -> dict[int, str]:
    """Per seed whose typhoon_2023 and ``control`` records ran in different numerics (precision, device or
    kernel family: :meth:`typhoon.records.Numerics.mixes_with`), what each ran in."""
    from typhoon.records import record_numerics_detail

    paths = runs.set_index(["strategy", "seed"])["record_path"]
    found = {}
    for seed in sorted(set(runs["seed"])):
        if (TREATMENT, seed) not in paths.index or (control, seed) not in paths.index:
            continue
        a = record_numerics_detail(out / paths[(TREATMENT, seed)])
        b = record_numerics_detail(out / paths[(control, seed)])
        if a is not None and b is not None and a.mixes_with(b):
            found[int(seed)] = f"{TREATMENT} {a.kernel_label} vs {control} {b.kernel_label}"
    return found


def finetune_table(out: str | Path, margins: dict[str, float], planning_sd: dict[str, float]) -> pd.DataFrame:
    """Per task and comparison (typhoon_2023 minus each of :data:`CONTROLS`), paired by seed, from the records
    in ``out/finetune``: :func:`paired_verdict` on every pair landed (``pairs`` 'all'), the seeds registered
    for the task (``n_registered``), the pairs that mix numerics (``mixed_seeds``, ``mixed_numerics``) and,
    where there are such pairs, a second row with the verdict without them (``pairs`` 'without mixed
    numerics'). ``margins`` and ``planning_sd``: the decisive-mlm design's, per task."""
    from typhoon.records import collect_results

    folder = Path(out) / "finetune"
    runs = collect_results(folder)
    runs = runs[runs["status"] == "ok"]
    if runs.empty:
        raise FileNotFoundError(f"{out}/finetune: no finished fine-tuned cell")
    rows = []
    for task, group in runs.groupby("task"):
        wide = group.pivot_table(index="seed", columns="strategy", values="primary_value")
        for control in CONTROLS:
            if not {TREATMENT, control} <= set(wide.columns):
                continue
            pair = wide[[TREATMENT, control]].dropna()  # a single pair is listed as it lands, with no test
            if pair.empty:
                continue
            mixed = mixed_numerics(folder, group, control)
            common = {"task": task, "comparison": f"{TREATMENT} - {control}", "metric": group["primary_metric"].iloc[0],
                      "n_registered": len(FINETUNE_SEEDS.get(task, ())), "margin": margins[task],
                      "planning_sd": planning_sd[task],
                      "mixed_seeds": " ".join(str(s) for s in mixed if s in pair.index) or None,
                      "mixed_numerics": "; ".join(dict.fromkeys(v for s, v in mixed.items() if s in pair.index)) or None}
            subsets = [(ALL_PAIRS, pair)]
            if common["mixed_seeds"]:
                subsets.append((SAME_NUMERICS, pair.drop(index=[s for s in mixed if s in pair.index])))
            for pairs, chosen in subsets:
                if chosen.empty:
                    continue
                diff = (chosen[TREATMENT] - chosen[control]).to_numpy(float)
                rows.append({**common, "pairs": pairs, "seeds": " ".join(str(s) for s in chosen.index),
                             f"mean_{TREATMENT}": float(chosen[TREATMENT].mean()),
                             "mean_control": float(chosen[control].mean()),
                             **paired_verdict(diff, margins[task], planning_sd[task])})
    columns = ["task", "comparison", "pairs", "metric", "n_pairs", "n_registered", "seeds", f"mean_{TREATMENT}",
               "mean_control", "mean_diff", "ci_low", "ci_high", "sd_diff", "margin", "tost_p", "equivalent",
               "equivalent_bonferroni", "planning_sd", "power_at_planning_sd", "power_at_observed_sd", "mixed_seeds",
               "mixed_numerics"]
    return pd.DataFrame(rows).reindex(columns=columns)


def decisive_margins_and_sds() -> tuple[dict[str, float], dict[str, float]]:
    """The decisive-mlm design's margins and its planning sd of 'typhoon - random', per task."""
    from typhoon.studies.sequential.design import study_design

    design = study_design("decisive-mlm")
    return dict(design.margins), {task: design.planning_sd_of(task, ("typhoon", "random")) for task in design.tasks}
