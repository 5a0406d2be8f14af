"""Terminating signals held across a step (:func:`gradsched.signal_hold.signals_held`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from gradsched.signal_hold import signals_held


class Raised(Exception):
    pass


@pytest.fixture
def raising_sigusr1():
    def handler(signum, frame):
        raise Raised(signum)

    previous = signal.signal(signal.SIGUSR1, handler)
    yield handler
    signal.signal(signal.SIGUSR1, previous)


def test_a_signal_inside_takes_effect_once_after_the_block(raising_sigusr1):
    reached_end = False
    with pytest.raises(Raised), signals_held():
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
        reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGUSR1) is raising_sigusr1


def test_held_even_when_another_thread_could_take_it(raising_sigusr1):
    """The kernel may deliver a process-directed signal to any thread that does not block
    it; CPython still runs the handler in the main thread, so a mask alone would not hold
    it. A thread started before the block (like a BLAS pool) never blocks it."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    steps = []
    try:
        with pytest.raises(Raised), signals_held():
            for step in range(20):
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.002)
                steps.append(step)
    finally:
        stop.set()
    assert steps == list(range(20))


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGUSR1)
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_no_signal_changes_nothing(raising_sigusr1):
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with signals_held():
        pass
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
    assert signal.getsignal(signal.SIGUSR1) is raising_sigusr1


def test_a_child_started_inside_can_still_be_stopped():
    """A rank started inside must not inherit blocked signals: teardown stops ranks with
    SIGTERM."""
    with signals_held():
        out = subprocess.run([sys.executable, "-c",
                              "import signal; print(signal.SIGTERM in "
                              "signal.pthread_sigmask(signal.SIG_BLOCK, []))"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "False"


def test_outside_the_main_thread_nothing_changes(raising_sigusr1):
    seen = []
    worker = threading.Thread(target=lambda: seen.append(_enter_and_read_handler()))
    worker.start()
    worker.join(10)
    assert seen == [raising_sigusr1]


def _enter_and_read_handler():
    with signals_held():
        return signal.getsignal(signal.SIGUSR1)
