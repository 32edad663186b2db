"""Compiles only in child processes: an os.fork child that leaves through os._exit, or a
multiprocessing Process (fork or spawn) that compiles beside one that does not."""

import multiprocessing
import os
import sys

import torch


def compile_once():
    torch.compile(lambda x: (x + 1) * 2, backend="eager")(torch.ones(3))


def idle():
    pass


if __name__ == "__main__":
    how = sys.argv[1]
    if how == "os.fork":
        pid = os.fork()
        if pid == 0:
            compile_once()
            os._exit(0)  # no cleanup at all in the child
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    else:
        context = multiprocessing.get_context(how)
        workers = [context.Process(target=compile_once), context.Process(target=idle)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
            assert worker.exitcode == 0
    print("done")
