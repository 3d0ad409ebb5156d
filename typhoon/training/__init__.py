"""The training stage: one cell of the grid end to end (:mod:`.run`), and the one step of each kind that
both a run and the grid estimate take (:mod:`.step`). Other stages take these names from here (``from
typhoon.training import numerics_here``): the device, precision and kernels a config runs with here
(``device_settings``), the FLOPs of a step (``flops``), the software a record was made with
(``software``), the progress file, the examples and the steps, where a resume state was saved (``Boundary``) and
the hooks of a phase (``PhaseCallback`` over a ``PhaseState``). Three modules are used whole:
``run`` (a cell's phases, ``run.set_up`` ... ``run.run``; ``run.phase_one``, the one way into the MLM phase),
``resume`` (``resume.save``, ``resume.load``) and ``speed`` (``speed.configure``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the light ones (the progress file the grid's
# monitor reads, the software versions) must not pay for torch (seconds).
if TYPE_CHECKING:
    # Modules other stages use whole: their names read qualified (``resume.load``, ``speed.configure``), or one of
    # them is the module's own name (``run.run``).
    from typhoon.training import resume, run, speed
    from typhoon.training.boundary import Boundary
    from typhoon.training.callbacks import PhaseCallback, PhaseState
    from typhoon.training.device_settings import (
        RunSettings,
        bit_source_here,
        check_numerics,
        numerics_here,
        planned_numerics,
        resolve_settings,
    )
    from typhoon.training.examples import eval_batches, prepare_data
    from typhoon.training.flops import EncoderShape, matmul_peak, step_flops
    from typhoon.training.progress_file import progress_path
    from typhoon.training.software import code_version, git_commit, library_versions
    from typhoon.training.step import fine_tune_step, linear_schedule, make_optimizer, mlm_step, to_device

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
