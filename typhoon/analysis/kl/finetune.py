"""The kl-original study's fine-tuned comparison: typhoon_2023 against random under the same 2023 phase 1
(runs: :func:`typhoon.runner.kl_original.run_finetune`), paired by seed, with TOST at the decisive design's
margins and the power it had."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis.kl.rows import t_interval
from typhoon.analysis.paired import tost_power


def finetune_table(out: str | Path, margins: dict[str, float], planning_sd: dict[str, float]) -> pd.DataFrame:
    """typhoon_2023 minus random per task, paired by seed, from the records in ``out/finetune``: the mean
    difference of the primary metric, its 95 % t interval, the TOST p at the task's margin, and the power of
    the TOST with these pairs at the planning sd (``planning_sd``, the decisive-mlm design's for typhoon -
    random) and at the observed sd."""
    from typhoon.analysis.significance import tost_paired
    from typhoon.records import collect_results

    runs = collect_results(Path(out) / "finetune")
    runs = runs[runs["status"] == "ok"]
    if runs.empty:
        raise FileNotFoundError(f"{out}/finetune: no finished fine-tuned cell")
    rows = []
    for task, group in runs.groupby("task"):
        wide = group.pivot_table(index="seed", columns="strategy", values="primary_value").dropna()
        if not {"typhoon_2023", "random"} <= set(wide.columns) or wide.empty:
            continue
        diff = (wide["typhoon_2023"] - wide["random"]).to_numpy(float)
        mean, low, high = t_interval(diff)  # a single pair is listed as it lands, without an interval or a test
        sd = float(np.std(diff, ddof=1)) if len(diff) > 1 else math.nan
        tost_p = tost_paired(diff, margins[task]) if len(diff) > 1 else math.nan
        rows.append({"task": task, "metric": group["primary_metric"].iloc[0], "n_pairs": len(diff),
                     "seeds": " ".join(str(s) for s in wide.index), "mean_typhoon_2023": float(wide["typhoon_2023"].mean()),
                     "mean_random": float(wide["random"].mean()), "mean_diff": mean, "ci_low": low, "ci_high": high,
                     "sd_diff": sd, "margin": margins[task], "tost_p": tost_p,
                     "equivalent": bool(tost_p < 0.05) if math.isfinite(tost_p) else None,
                     "planning_sd": planning_sd[task],
                     "power_at_planning_sd": (tost_power(len(diff), planning_sd[task], margins[task])
                                              if len(diff) > 1 else 0.0),  # one pair: no test can decide
                     "power_at_observed_sd": tost_power(len(diff), sd, margins[task]) if sd > 0 else math.nan})
    return pd.DataFrame(rows)


def decisive_margins_and_sds() -> tuple[dict[str, float], dict[str, float]]:
    """The decisive-mlm design's margins and its planning sd of 'typhoon - random', per task."""
    from typhoon.analysis.decisive import study_design

    design = study_design("decisive-mlm")
    return dict(design.margins), {task: design.planning_sd_of(task, ("typhoon", "random")) for task in design.tasks}
