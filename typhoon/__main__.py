"""`python -m typhoon`: the command line (typhoon.cli), and how the process ends after a stop, a refusal or a
finished training command."""

import sys

from typhoon import cli


def run_command() -> None:
    code = cli.main()
    if code in (130, 143):  # stopped by a signal, everything cleaned up: end now (typhoon.runner.stop.exit_stopped)
        from typhoon.runner import exit_stopped

        exit_stopped(code)
    if code in (0, 1) and cli.TRAINED:
        # finished: its outputs, and the manifest's last write (wall_s, the whole invocation), are on disk; the
        # interpreter's teardown would add 2-3 s with torch, transformers and datasets loaded, after that write
        from typhoon.runner import exit_finished

        exit_finished(code)
    if code == 2:  # refused or out of disk: a notebook client thread may still wait on a kernel that is gone
        from typhoon.runner import exit_now_if_threads_linger

        exit_now_if_threads_linger(code)
    sys.exit(code)


# A worker process (typhoon.runner.workers, spawned) imports this module as __mp_main__: it runs no command.
if __name__ == "__main__":
    run_command()
