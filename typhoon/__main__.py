"""`python -m typhoon`: the command line (typhoon.cli), and how the process ends after a stop or a refusal."""

import sys

from typhoon.cli import main


def run_command() -> None:
    code = main()
    if code in (130, 143):  # stopped by a signal, everything cleaned up: end now (typhoon.runner.stop.exit_stopped)
        from typhoon.runner import exit_stopped

        exit_stopped(code)
    if code == 2:  # refused or out of disk: a notebook client thread may still wait on a kernel that is gone
        from typhoon.runner import exit_now_if_threads_linger

        exit_now_if_threads_linger(code)
    sys.exit(code)


# A worker process (typhoon.runner.workers, spawned) imports this module as __mp_main__: it runs no command.
if __name__ == "__main__":
    run_command()
