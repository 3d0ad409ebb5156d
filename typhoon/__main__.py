import sys

from typhoon.cli import main

code = main()
if code in (2, 130, 143):  # stopped early: a notebook client thread may still wait on a kernel that is gone
    from typhoon.interrupt import exit_now_if_threads_linger

    exit_now_if_threads_linger(code)
sys.exit(code)
