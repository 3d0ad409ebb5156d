"""How long a grid will take on this machine, measured before it runs (``reproduce --estimate``).

The estimate is a short calibration (80 s for the ``cpu`` grid on a shared 2-core AVX512-BF16 EPYC)
and arithmetic:

1. **The work of each cell is counted, not guessed.** The cell's training data is tokenized as the run
   tokenizes it, and its batches are drawn exactly as the run draws them (``length_grouped_batches`` with
   the run's seed, in the same order: MLM epochs, then fine-tuning epochs). Batches are padded per batch
   (``collate``, to a multiple of 8), so every step's executed FLOPs (:func:`typhoon.training.flops.step_flops`)
   follow from the real token lengths, not from ``max_length``; an MLM step's selected positions follow
   from per-row rates drawn from the cell's schedule, as the run draws them. The number of distinct padded
   widths is counted too: each new shape costs a kernel warm-up. A ``typhoon_task`` cell's task model
   warm-up is counted as well: ``task_head_warmup`` fine-tuning steps in its own data order and a dev pass.
2. **The rate is measured on the same step.** A calibration process sets up one cell of each kind
   (backbone, task, precision, attention, dropout, thread count: :func:`typhoon.training.run.set_up`) and times
   a few of the run's own steps (:mod:`typhoon.training.step`: collate, masking, forward, backward, clip,
   fused AdamW and the saliency update) and evaluation passes on batches chosen across the range of widths,
   each twice: the first pass at a new width includes its warm-up, the second does not. The MLM step is
   timed once per kind of saliency among the cells (:data:`MLM_KINDS`: none, the MLM loss's, a frozen task
   model's, whose extra forward and input backward the rate then holds); the task model's warm-up takes
   fine-tuning steps, priced at their rate. Seconds per executed GFLOP (warm) and seconds per new width
   (warm-up) come out of it.
3. **Concurrency is measured, not assumed.** With ``workers`` cells at once on a CPU, each cell gets
   ``cores // workers`` threads and competes with the others for memory bandwidth and caches. So the
   calibration runs as ``workers`` processes *at the same time*, each with the cells' thread count, and the
   rates are their mean: what a step costs while the other workers run theirs.
4. **Fixed costs are measured** where they can be: the calibration kernels start as the cells' do and
   first import what ``10_run`` imports (kernel start + imports, ``workers`` at once), each cell's set-up (backbone, tokenized data), the
   matmul-peak measurement every run makes, building the two models, the record and its figure. The
   analysis notebooks' time is a reference figure (:data:`ANALYSIS_REFERENCE_S`, measured on the 2-core
   machine the bundle was developed on with ``benchmarks/bench_smoke.py``), said as such in the output.

The grid's wall time is the cells' times list-scheduled over the workers in grid order (what
``run_grid``'s thread pool does), plus the analysis. Only cells without a complete record count.
``benchmarks/bench_estimate.py`` compares an estimate with the real grid.

This module imports no torch at the top: the CLI imports it for ``--help``. The calibration runs in
papermill kernels, started as the cells' kernels are (:func:`run_calibration`): the time before the
calibration starts is each cell's kernel start and imports, measured on the way.
"""


from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from typhoon import machine
from typhoon.config import RunConfig
from typhoon.runner import calibration_cache
from typhoon.runner.step_timing import (
    CALIBRATION_BUDGET_S,
    MIN_SAMPLE_BATCHES,
    SAMPLE_BATCHES,
    calibrate,
    calibration_key,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


# The analysis notebooks after the grid, in seconds each (papermill's duration, kernel start included), with
# ``quick = true``: measured with benchmarks/bench_smoke.py on the 2-core Xeon (AVX512-BF16, AMX) the bundle
# was developed on, shared with other jobs (load average 6-8). Not calibrated on this machine: the estimate
# shows them as a reference, run ``workers`` at once as reproduce runs them; without ``quick`` the
# walkthroughs 01 and 40 do more, so the figure is a lower bound there.
ANALYSIS_REFERENCE_S = {"00_setup.ipynb": 22.1, "01_masking_walkthrough.ipynb": 39.1, "20_statistics.ipynb": 11.7,
                        "30_budget_spread.ipynb": 21.1, "40_mask_schedules.ipynb": 30.1}


# The comparison with the reference run, after the others (papermill, kernel start included: 8.7 s on the
# 2-core AVX512-BF16 EPYC, at load about 3).
REFERENCE_NOTEBOOK_S = 8.7


HEARTBEAT_S = 20.0  # a line while the calibration runs, so a minute of it is not silence


# What a run's notebook imports (notebooks/10_run.ipynb): timed in a kernel to price a cell's start.
RUN_NOTEBOOK_IMPORTS = ("import pandas as pd\nfrom IPython.display import Image, display\n"
                        "from typhoon.config import RunConfig, resolve\nfrom typhoon.report import figures\n"
                        "from typhoon.training import run as training_run\n"
                        "from typhoon.training.progress_bars import disable_library_bars\ndisable_library_bars()\n")


@dataclass
class GridEstimate:
    """What a grid will cost here: per cell and in all, with how it was measured."""

    profile: str
    cells_total: int
    cells_todo: list[str]
    workers: int
    threads: int | None  # torch threads per cell (None: the cell's own setting / all cores)
    kernels: str  # the chosen precision with its reason, attention, dropout, device
    per_cell: dict  # record path -> seconds per part and "total_s"
    cell_start_s: float  # papermill kernel start + the run notebook's imports
    analysis_s: float
    grid_s: float  # cells' makespan over the workers
    total_s: float
    calibration_s: float
    how: str  # how the rates were measured (concurrency)
    kinds: list = field(default_factory=list)
    quick_analysis: bool = True
    # The share of their cores the calibration processes got while timing steps (CPU time / (wall x
    # threads)): below 1 when other jobs share the machine. The estimate is at that load; on idle cores
    # (the machine to the grid alone) it would be about ``core_share`` times as long (on a CPU).
    core_share: float = 1.0
    cores: int = 0  # usable cores of this machine (0: not known)

    @property
    def idle_total_s(self) -> float:
        return self.total_s * self.core_share

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self, max_cells: int = 12) -> str:
        lines = [f"estimate for profile {self.profile!r}: {len(self.cells_todo)} of {self.cells_total} cells to run "
                 f"({self.cells_total - len(self.cells_todo)} complete), {self.workers} at once"
                 + (f", {self.threads} thread(s) each" if self.threads else ""),
                 f"  kernels: {self.kernels}",
                 f"  calibrated in {self.calibration_s:.0f} s: {self.how}",
                 f"  per cell: kernel start, imports and shutdown {self.cell_start_s:.1f} s"]
        for path in self.cells_todo[:max_cells]:
            c = self.per_cell[path]
            warmup = (f"task model {c['warmup_steps']:.0f} steps {c['warmup_s']:.0f} s, " if c.get("warmup_steps")
                      else "")
            timed_as = (f" (timed as {c['mlm_kind_timed']})" if c.get("mlm_kind_timed", c.get("mlm_kind")) != c.get("mlm_kind")
                        else "")
            lines.append(f"  {path.removeprefix('runs/')}: {warmup}MLM {c['mlm_steps']:.0f} steps{timed_as} {c['mlm_s']:.0f} s, fine-tune "
                         f"{c['ft_steps']:.0f} steps {c['ft_s']:.0f} s, eval {c['eval_s']:.0f} s, fixed "
                         f"{c['setup_s'] + self.cell_start_s:.0f} s = {c['total_s']:.0f} s")
        if len(self.cells_todo) > max_cells:
            lines.append(f"  ... and {len(self.cells_todo) - max_cells} more cells")
        lines.append(f"  grid: {duration(self.grid_s)} for the cells on {self.workers} worker(s)"
                     + (f" + analysis notebooks ~{duration(self.analysis_s)} (reference figure, not calibrated here"
                        + ("" if self.quick_analysis else "; at least: quick = false does more") + ")"
                        if self.analysis_s else "")
                     + f" = about {duration(self.total_s)}")
        oversubscribed = self.cores and self.workers * (self.threads or 1) > self.cores
        if self.core_share < 0.9 and oversubscribed:
            lines.append(f"  {self.workers} cell(s) x {self.threads or 1} thread(s) on {self.cores} usable core(s): each "
                         f"process got {100 * self.core_share:.0f} % of a core while calibrating, as the cells will")
        elif self.core_share < 0.9:
            lines.append(f"  the machine is shared: while calibrating, the cells' processes got {100 * self.core_share:.0f} % "
                         f"of their cores; on idle cores about {duration(self.idle_total_s)}")
        return "\n".join(lines)


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def makespan(durations: list[float], workers: int) -> float:
    """Wall time of tasks taken in order by ``workers`` workers, each task to the first free one."""
    free = [0.0] * max(1, workers)
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free) if durations else 0.0


def calibration_notebook(request: Path, result: Path):
    """A notebook that starts as a cell's does (the run notebook's imports), then calibrates."""
    import nbformat

    calibrate_cell = (f"from typhoon.runner.estimate import calibrate_files\n"
                      f"calibrate_files({str(request)!r}, {str(result)!r})\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RUN_NOTEBOOK_IMPORTS),
                                               nbformat.v4.new_code_cell(calibrate_cell)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def run_calibration(configs: list[RunConfig], threads: int | None, processes: int,
                    expected_s: float | None = None) -> list[dict]:
    """``processes`` calibrations at once, each in a papermill kernel started as a cell's kernel is, with
    ``threads`` torch threads. Each result has ``start_s``: what papermill took besides the calibration
    (kernel start, the run notebook's imports, shutdown, writing the notebook: what every cell pays
    besides its run)."""
    import nbformat
    import papermill

    from typhoon.runner import notebooks


    with tempfile.TemporaryDirectory(prefix="typhoon-estimate-") as tmp:
        folder = Path(tmp)
        request = folder / "request.json"
        request.write_text(json.dumps({"configs": [c.to_dict() for c in configs], "threads": threads}))

        def one(i: int) -> dict:
            source, target, result = folder / f"calibrate{i}.ipynb", folder / f"done{i}.ipynb", folder / f"result{i}.json"
            nbformat.write(calibration_notebook(request, result), source)
            started = time.perf_counter()
            try:
                papermill.execute_notebook(str(source), str(target), cwd=str(REPO_ROOT), **notebooks.PAPERMILL_OPTIONS)
            except Exception as err:
                raise RuntimeError(f"the estimate's calibration failed: {err}") from err
            total = time.perf_counter() - started
            measured = json.loads(result.read_text())
            # everything but the calibration itself: kernel start, imports, shutdown, writing the notebook
            measured["start_s"] = total - (measured["calibration_finished"] - measured["calibration_started"])
            return measured

        kinds = len({calibration_key(c) for c in configs})
        expect = (f"the last one here took {duration(expected_s)}" if expected_s else
                  f"{kinds} kind(s) of cell, each timed for up to about {duration(CALIBRATION_BUDGET_S + 30)}, "
                  "longer on a busy or AVX2-only CPU")
        print(f"estimate: calibrating in {processes} kernel(s) at once, {threads or 'all'} thread(s) each: real MLM, "
              f"fine-tuning and evaluation steps of {len(configs)} cell(s) ({expect}; kept "
              f"{duration(calibration_cache.MAX_AGE_S)} for a restart; --no-estimate skips it)", flush=True)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=processes) as pool:  # the kernels calibrate at the same time
            futures = [pool.submit(one, i) for i in range(processes)]
            while not wait(futures, timeout=HEARTBEAT_S).done == set(futures):
                done = sum(f.done() for f in futures)
                print(f"estimate: still calibrating ({time.perf_counter() - started:.0f} s, "
                      f"{done} of {processes} kernel(s) done)", flush=True)
            return [f.result() for f in futures]


def calibrate_files(request: str, result: str) -> None:
    """The calibration notebook's call: the request (configs, threads) from a JSON file, the measured
    costs to another, with the moment calibrating started (``time.perf_counter``: the same clock as the
    process on this machine that started the kernel) and the moment it finished."""
    from typhoon.atomic import atomic_write_json

    started = time.perf_counter()
    spec = json.loads(Path(request).read_text())
    measured = calibrate([RunConfig.from_dict(c) for c in spec["configs"]], spec.get("threads"))
    atomic_write_json(Path(result), {**measured, "calibration_started": started,
                                     "calibration_finished": time.perf_counter()})


def estimate_grid(profile: str, configs: list[RunConfig], out_dir: Path, workers: int, *, analysis: bool = True,
                  quick_analysis: bool = True) -> GridEstimate:
    """Calibrate on this machine and estimate the grid's wall time (see the module docstring)."""
    from typhoon.records import run_record

    started = time.perf_counter()
    todo = [c for c in configs if not run_record.is_complete(out_dir / c.relative_dir(), c)]
    gpus = machine.gpu_devices()
    threads = machine.cell_threads(todo[0], workers, gpus) if todo else None
    if todo and threads is None and not gpus:
        threads = todo[0].num_threads or machine.usable_cores()
    processes = 1 if gpus else max(1, min(workers, len(todo)))
    per_cell, kinds, kernels, start_s = {}, [], "nothing to run", 0.0
    if todo:
        cached = calibration_cache.load(profile, todo, threads, processes)
        if cached is not None:  # a restart: the cells were priced here minutes ago, with this code
            results = cached.results
            print(f"estimate: the calibration made {duration(cached.age_s)} ago on this machine is reused (same "
                  f"code, profile, cells and threads; kept {duration(calibration_cache.MAX_AGE_S)}; it took "
                  f"{duration(cached.calibration_s)})", flush=True)
        else:
            last = calibration_cache.last_duration(profile, threads, processes)
            results = run_calibration(todo, threads, processes, expected_s=last)
            calibration_cache.save(profile, todo, threads, processes, results, time.perf_counter() - started)
        start_s = sum(r["start_s"] for r in results) / len(results)
        kinds = results[0]["kinds"]
        for path, first_cell in results[0]["cells"].items():  # numbers: the mean over the concurrent processes
            parts = {k: sum(r["cells"][path][k] for r in results) / len(results) if isinstance(v, (int, float)) else v
                     for k, v in first_cell.items()}
            parts["total_s"] = (parts.get("warmup_s", 0.0) + parts["mlm_s"] + parts["ft_s"] + parts["eval_s"]
                                + parts["setup_s"] + start_s)
            per_cell[path] = parts
        first = kinds[0]
        kernels = (f"{first['precision']} ({first['precision_reason']}), {first['attention']} attention, "
                   f"{first['dropout']} dropout on {first['device']}, {first['threads']} thread(s) per cell")
    paths_todo = [c.relative_dir().as_posix() for c in todo]
    grid_s = makespan([per_cell[p]["total_s"] for p in paths_todo], workers)
    analysis_s = makespan(list(ANALYSIS_REFERENCE_S.values()), workers) + REFERENCE_NOTEBOOK_S if analysis else 0.0
    how = (f"{processes} calibration process(es) at once, as the grid runs its cells, each timing "
           f"{MIN_SAMPLE_BATCHES}-{SAMPLE_BATCHES} batches per phase twice (cold, warm) per kind of cell")
    return GridEstimate(profile=profile, cells_total=len(configs), cells_todo=paths_todo, workers=workers,
                        threads=threads, kernels=kernels, per_cell=per_cell, cell_start_s=start_s,
                        analysis_s=analysis_s, grid_s=grid_s, total_s=grid_s + analysis_s,
                        calibration_s=time.perf_counter() - started, how=how, kinds=kinds,
                        quick_analysis=bool(quick_analysis),
                        core_share=(sum(r["core_share"] for r in results) / len(results)) if todo and not gpus else 1.0,
                        cores=machine.usable_cores())


def estimate_only(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
                  overrides: dict | None = None, analysis: bool = True) -> GridEstimate:
    """``reproduce --estimate``: the estimate of a profile's grid into ``out_dir`` (default: the profile's
    folder), without running anything or writing into the folder."""
    from typhoon import paths
    from typhoon.config import get_profile

    spec = get_profile(profile)
    workers, note = machine.choose_workers(workers, spec.workers)
    if note:
        print(note, flush=True)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    configs = spec.grid(overrides)
    return estimate_grid(spec.name, configs, paths.resolve_out_dir(out_dir, spec.name), workers, analysis=analysis,
                         quick_analysis=bool(spec.analysis.get("quick")))
