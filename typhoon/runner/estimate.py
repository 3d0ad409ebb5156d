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
4. **Fixed costs are measured** where they can be: the calibration runs in worker processes started as the
   grid's are (:class:`typhoon.runner.workers.WorkerProcess`, ``workers`` at once), so each worker's start and
   imports, paid once per worker, are measured on the way, with the matmul-peak measurement each worker makes
   once; per cell, its set-up (backbone, tokenized data), building the two models and writing the record.
   The analysis notebooks' time is a reference figure (:data:`ANALYSIS_REFERENCE_S`, measured on the 2-core
   machine the bundle was developed on with ``benchmarks/bench_smoke.py``), said as such in the output.
5. **Cells sharing a GPU are measured sharing it.** On GPUs the calibration runs as many processes at once
   on one device as the grid puts there (``workers`` / devices): each times its steps while the others run
   theirs, so the rates hold the device's sharing (time slicing between processes, memory bandwidth).

The grid's wall time is the cells' times list-scheduled over the workers in grid order (what the pool does:
each free worker takes the next cell), each worker starting after its start-up, plus the analysis. Only cells
without a complete record count. ``benchmarks/bench_estimate.py`` compares an estimate with the real grid.

A resumed grid reuses its own estimate (:func:`folder_estimate`): the one its last invocation made, kept in the
folder's ``MANIFEST.json``, when it was made here with the same code, software, workers and threads, priced every
cell still to run with the same settings and is younger than the calibration cache's age limit. Fewer cells
left would otherwise mean fewer calibration processes, another cache key, and a calibration longer than the cells.

This module imports no torch at the top: the CLI imports it for ``--help``.
"""


from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from typhoon import machine, paths
from typhoon.config import RunConfig
from typhoon.runner import calibration_cache
from typhoon.runner.cells import saved_boundary
from typhoon.runner.step_timing import (
    CALIBRATION_BUDGET_S,
    MIN_SAMPLE_BATCHES,
    SAMPLE_BATCHES,
    calibration_key,
)
from typhoon.training import Boundary

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
    worker_start_s: float  # a worker process's start and imports, and its matmul-peak measurement: once per worker
    analysis_s: float
    grid_s: float  # cells' makespan over the workers
    total_s: float
    calibration_s: float
    how: str  # how the rates were measured (concurrency)
    kinds: list = field(default_factory=list)
    quick_analysis: bool = True
    timing_key: str = ""  # calibration_cache.key_digest of what decides the timings (the grid's workers, not processes)
    made_at: float = 0.0  # time.time() of the calibration the prices come from
    reused_from: str = ""  # where the prices came from when not calibrated now: said in the text
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

    @property
    def calibrated_now(self) -> bool:
        """Whether this estimate calibrated (False: nothing to run, or priced by a kept calibration)."""
        return bool(self.cells_todo) and not self.reused_from

    def analysis_text(self) -> str:
        return (f"analysis notebooks ~{duration(self.analysis_s)} (reference figure, not calibrated here"
                + ("" if self.quick_analysis else "; at least: quick = false does more") + ")")

    def text(self, max_cells: int = 12) -> str:
        """What the estimate says: how it priced the cells (a calibration now, or the one it reused, named),
        each cell, the grid. Only a calibration that ran now is said to have run."""
        head = (f"estimate for profile {self.profile!r}: {len(self.cells_todo)} of {self.cells_total} cells to run "
                f"({self.cells_total - len(self.cells_todo)} complete)")
        if not self.cells_todo:
            return "\n".join([f"{head}: nothing to train, so no calibration",
                               *([f"  {self.analysis_text()}"] if self.analysis_s else [])])
        lines = [f"{head}, {self.workers} at once" + (f", {self.threads} thread(s) each" if self.threads else ""),
                 f"  kernels: {self.kernels}",
                 f"  priced by {self.reused_from}" if self.reused_from else
                 f"  calibrated in {self.calibration_s:.0f} s: {self.how}",
                 f"  per worker, once: start, imports and the matmul peak {self.worker_start_s:.1f} s"]
        for path in self.cells_todo[:max_cells]:
            c = self.per_cell[path]
            warmup = (f"task model {c['warmup_steps']:.0f} steps {c['warmup_s']:.0f} s, " if c.get("warmup_steps")
                      else "")
            timed_as = (f" (timed as {c['mlm_kind_timed']})" if c.get("mlm_kind_timed", c.get("mlm_kind")) != c.get("mlm_kind")
                        else "")
            lines.append(f"  {path.removeprefix('runs/')}: {warmup}MLM {c['mlm_steps']:.0f} steps{timed_as} {c['mlm_s']:.0f} s, fine-tune "
                         f"{c['ft_steps']:.0f} steps {c['ft_s']:.0f} s, eval {c['eval_s']:.0f} s, fixed "
                         f"{c['setup_s']:.1f} s = {c['total_s']:.0f} s"
                         + (f" (resumes after {c['resumes_after']}: the saved part left out)" if c.get("resumes_after")
                            else ""))
        if len(self.cells_todo) > max_cells:
            lines.append(f"  ... and {len(self.cells_todo) - max_cells} more cells")
        lines.append(f"  grid: {duration(self.grid_s)} for the cells on {self.workers} worker(s)"
                     + (f" + {self.analysis_text()}" if self.analysis_s else "")
                     + f" = about {duration(self.total_s)}")
        # the share was measured by the calibration the prices come from: this one, or the one reused
        measured = "while calibrating" if self.calibrated_now else "when these prices were measured"
        oversubscribed = self.cores and self.workers * (self.threads or 1) > self.cores
        if self.core_share < 0.9 and oversubscribed:
            lines.append(f"  {self.workers} cell(s) x {self.threads or 1} thread(s) on {self.cores} usable core(s): each "
                         f"process got {100 * self.core_share:.0f} % of a core {measured}, as the cells will")
        elif self.core_share < 0.9:
            lines.append(f"  the machine is shared: {measured}, the cells' processes got {100 * self.core_share:.0f} % "
                         f"of their cores; on idle cores about {duration(self.idle_total_s)}")
        return "\n".join(lines)


def left_to_run(parts: dict, boundary: Boundary | None, config: RunConfig) -> dict:
    """A cell's priced parts with what its resume state saved taken out: after MLM epoch e, that share of the MLM
    phase (all of it after a whole run's phase 1); after fine-tuning epoch e the MLM phase and e of the fine-tuning
    epochs. The worker start, set-up and evaluation are paid again."""
    if boundary is None:
        return {}
    if boundary.phase == "ft":
        mlm_left, ft_left = 0.0, 1 - boundary.epoch / config.ft_epochs
    else:
        mlm_left, ft_left = 1 - boundary.epoch / max(1, config.mlm_epochs), 1.0
    left = {"mlm_s": parts["mlm_s"] * mlm_left, "ft_s": parts["ft_s"] * ft_left, "resumes_after": boundary.describe()}
    return {**left, "total_s": cell_total_s({**parts, **left})}


def cell_total_s(parts: dict) -> float:
    """A cell's seconds: its task model's warm-up (if any), MLM, fine-tuning, evaluation and set-up."""
    return parts.get("warmup_s", 0.0) + parts["mlm_s"] + parts["ft_s"] + parts["eval_s"] + parts["setup_s"]


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def makespan(durations: list[float], workers: int, start_s: float = 0.0) -> float:
    """Wall time of tasks taken in order by ``workers`` workers, each task to the first free one, every worker
    free from ``start_s`` on (its start-up)."""
    free = [start_s] * max(1, workers)
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free) if durations else 0.0


def run_calibration(configs: list[RunConfig], threads: int | None, processes: int, device: str | None = None,
                    expected_s: float | None = None) -> list[dict]:
    """``processes`` calibrations at once, each in a worker process started as the grid's workers are, with
    ``threads`` torch threads (and on ``device``, where several workers share a GPU). Each result has
    ``start_s``: the worker's start and imports before its calibration began."""
    from typhoon.runner.workers import WorkerProcess

    kinds = len({calibration_key(c) for c in configs})
    expect = (f"the last one here took {duration(expected_s)}" if expected_s else
              f"{kinds} kind(s) of cell, each timed for up to about {duration(CALIBRATION_BUDGET_S + 30)}, "
              "longer on a busy or AVX2-only CPU")
    print(f"estimate: calibrating in {processes} worker process(es) at once, {threads or 'all'} thread(s) each"
          f"{' on ' + device if device else ''}: real MLM, fine-tuning and evaluation steps of {len(configs)} cell(s) "
          f"({expect}; kept {duration(calibration_cache.MAX_AGE_S)} for a restart; --no-estimate skips it)", flush=True)
    configs = [c.replace(device=device) for c in configs] if device else configs
    started = time.perf_counter()
    workers = [WorkerProcess(f"typhoon-calibration-{i}") for i in range(processes)]
    try:
        for worker in workers:  # they calibrate at the same time
            worker.send("calibrate", [c.to_dict() for c in configs], threads)
        results, heartbeat = [None] * processes, started
        while any(r is None for r in results):
            from multiprocessing.connection import wait as wait_for_any

            wait_for_any([h for w, r in zip(workers, results, strict=True) if r is None for h in w.ready_handles],
                         timeout=HEARTBEAT_S)
            for i, worker in enumerate(workers):
                if results[i] is None and (worker.conn.poll() or not worker.alive()):
                    try:
                        results[i] = worker.reply()
                    except Exception as err:
                        raise RuntimeError(f"the estimate's calibration failed: {err}") from err
                    results[i]["start_s"] = results[i]["calibration_started"] - started
            if time.perf_counter() - heartbeat >= HEARTBEAT_S and any(r is None for r in results):
                heartbeat = time.perf_counter()
                done = sum(r is not None for r in results)
                print(f"estimate: still calibrating ({heartbeat - started:.0f} s, {done} of {processes} done)", flush=True)
        return results
    finally:
        for worker in workers:
            worker.close()


def config_digest(config: RunConfig) -> str:
    """A short hash of a cell's resolved settings: a kept price is for the same settings only."""
    import hashlib

    return hashlib.sha256(config.to_json().encode()).hexdigest()[:12]


def folder_estimate(out_dir: Path, key: str, todo: list[RunConfig], now: float | None = None) -> dict | None:
    """The estimate the folder's last invocation made (``MANIFEST.json``, finished or stopped), when it can price
    this resume: made with the same timing key (:func:`typhoon.runner.calibration_cache.timing_key`), every cell of
    ``todo`` priced with the same settings, younger than the cache's age limit. None otherwise."""
    from typhoon.records import invocations, read_manifest

    manifest = read_manifest(out_dir) or {}
    made = [run["estimate"] for run in invocations(manifest) if isinstance(run.get("estimate"), dict)]
    if not made:
        return None
    plan = made[-1]
    age = (time.time() if now is None else now) - float(plan.get("made_at", 0))
    priced = plan.get("per_cell", {})
    fits = all(priced.get(c.relative_dir().as_posix(), {}).get("config") == config_digest(c) for c in todo)
    return plan if plan.get("timing_key") == key and fits and 0 <= age < calibration_cache.MAX_AGE_S else None


def estimate_grid(profile: str, configs: list[RunConfig], out_dir: Path, workers: int, *, analysis: bool = True,
                  quick_analysis: bool = True) -> GridEstimate:
    """Calibrate on this machine and estimate the grid's wall time (see the module docstring)."""
    from typhoon.records import is_complete

    started = time.perf_counter()
    todo = [c for c in configs if not is_complete(out_dir / c.relative_dir(), c)]
    gpus = machine.gpu_devices()
    threads = (todo[0].num_threads or max(1, machine.usable_cores() // workers)) if todo else None
    # on GPUs the workers of one device, sharing it; on the CPU every worker, sharing the cores
    processes = max(1, min(workers // len(gpus) if gpus else workers, len(todo)))
    device = gpus[0] if gpus else None
    key = calibration_cache.key_digest(calibration_cache.timing_key(profile, threads, workers))
    per_cell, kinds, kernels, start_s, made_at, reused_from = {}, [], "nothing to run", 0.0, time.time(), ""
    own = folder_estimate(out_dir, key, todo) if todo else None
    if own is not None:  # a resume: this grid was priced here minutes ago, with this code, workers and threads
        kinds, start_s, made_at = own["kinds"], own["worker_start_s"], own["made_at"]
        for config in todo:
            parts = dict(own["per_cell"][config.relative_dir().as_posix()])
            parts["mlm_s"], parts["ft_s"] = parts.pop("priced_mlm_s", parts["mlm_s"]), parts.pop("priced_ft_s", parts["ft_s"])
            parts.pop("resumes_after", None)
            per_cell[config.relative_dir().as_posix()] = {**parts, "total_s": cell_total_s(parts)}
        reused_from = (f"this grid's own estimate, made {duration(time.time() - made_at)} ago ({paths.MANIFEST}: same "
                       f"code, machine, {workers} worker(s) x {threads or 'all'} thread(s))")
        print(f"estimate: {len(todo)} cell(s) left, {reused_from.replace('this grid', 'priced from this grid')}: "
              "no calibration", flush=True)
    elif todo:
        cached = calibration_cache.load(profile, todo, threads, processes, workers=workers)
        if cached is not None:  # a restart: the cells were priced here minutes ago, with this code
            results, made_at = cached.results, time.time() - cached.age_s
            reused_from = (f"the calibration made {duration(cached.age_s)} ago on this machine"
                           f"{' at commit ' + cached.commit[:7] if cached.commit else ''} (same code, torch, profile, "
                           f"cells, {workers} worker(s) x {threads or 'all'} thread(s); kept "
                           f"{duration(calibration_cache.MAX_AGE_S)}; it took {duration(cached.calibration_s)})")
            print(f"estimate: {reused_from} is reused", flush=True)
        else:
            last = calibration_cache.last_duration(profile, threads, processes)
            results = run_calibration(todo, threads, processes, device, expected_s=last)
            calibration_cache.save(profile, todo, threads, processes, results, time.perf_counter() - started,
                                   workers=workers)
        kinds = results[0]["kinds"]
        # a worker's start and imports, and the matmul peak it measures once (its first cell)
        start_s = sum(r["start_s"] for r in results) / len(results) + kinds[0]["peak_s"]
        for path, first_cell in results[0]["cells"].items():  # numbers: the mean over the concurrent processes
            parts = {k: sum(r["cells"][path][k] for r in results) / len(results) if isinstance(v, (int, float)) else v
                     for k, v in first_cell.items()}
            parts["total_s"] = cell_total_s(parts)
            per_cell[path] = parts
    if kinds:
        first = kinds[0]
        kernels = (f"{first['precision']} ({first['precision_reason']}), {first['attention']} attention, "
                   f"{first['dropout']} dropout on {first['device']}, {first['threads']} thread(s) per cell")
    paths_todo = [c.relative_dir().as_posix() for c in todo]
    for config in todo:  # a cell with a resume state goes on from it: its saved part costs nothing again
        parts = per_cell.get(config.relative_dir().as_posix())
        if parts is not None:
            parts["config"] = config_digest(config)
            left = left_to_run(parts, saved_boundary(config, out_dir), config)
            if left:  # the whole price kept beside what is left, for the next resume of this grid
                parts.update(priced_mlm_s=parts["mlm_s"], priced_ft_s=parts["ft_s"], **left)
    grid_s = makespan([per_cell[p]["total_s"] for p in paths_todo], workers, start_s)
    analysis_s = makespan(list(ANALYSIS_REFERENCE_S.values()), workers) + REFERENCE_NOTEBOOK_S if analysis else 0.0
    how = (f"{processes} calibration process(es) at once{' on one GPU' if gpus else ''}, as the grid runs its cells, each timing "
           f"{MIN_SAMPLE_BATCHES}-{SAMPLE_BATCHES} batches per phase twice (cold, warm) per kind of cell" if todo
           else "no calibration: no cell to run")
    if own is not None:
        share = float(own.get("core_share", 1.0))
    else:
        share = (sum(r["core_share"] for r in results) / len(results)) if todo and not gpus else 1.0
    return GridEstimate(profile=profile, cells_total=len(configs), cells_todo=paths_todo, workers=workers,
                        threads=threads, kernels=kernels, per_cell=per_cell, worker_start_s=start_s,
                        analysis_s=analysis_s, grid_s=grid_s, total_s=grid_s + analysis_s,
                        calibration_s=time.perf_counter() - started if todo else 0.0,
                        how=own["how"] if own else how, kinds=kinds,
                        quick_analysis=bool(quick_analysis), timing_key=key, made_at=made_at, reused_from=reused_from,
                        core_share=share, cores=machine.usable_cores())


def estimate_only(profile: str, out_dir: str | Path | None = None, *, workers: int | None = None,
                  configs: Sequence[RunConfig] | None = None, analysis: bool = True) -> GridEstimate:
    """``reproduce --estimate``: the estimate of a profile's grid (``configs``, its cells as the command line
    resolved them; None: the profile's own) into ``out_dir`` (default: the profile's folder), without running
    anything or writing into the folder."""
    from typhoon import paths
    from typhoon.profiles import get_profile
    from typhoon.runner.workers import choose_workers

    spec = get_profile(profile)
    configs = spec.grid() if configs is None else list(configs)
    workers, note = choose_workers(workers, spec.workers, configs)
    if note:
        print(note, flush=True)
    return estimate_grid(spec.name, configs, paths.resolve_out_dir(out_dir, spec.name), workers, analysis=analysis,
                         quick_analysis=bool(spec.analysis.get("quick")))
