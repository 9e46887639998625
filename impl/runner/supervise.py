"""The supervisor of one worker command: the process that outlives everything it started.

Rules of this file: the standard library only, no runstore import and no threads. The
runner (:mod:`runstore.runner.scratch_run`) starts it as its own process, in a session of
its own, with ``python -I -S supervise.py SPEC_FD`` (isolated: no ``PYTHON*`` variable, no
site packages, so a campaign's environment cannot change how it runs). It makes itself a
Linux child subreaper, so every descendant of the command whose parent dies is re-parented
to it, whatever sessions and process groups it made; starts the command in a session of
its own (``SIGKILL`` to it if the supervisor dies, ``PR_SET_PDEATHSIG``); and before it
exits it kills every descendant with ``SIGKILL`` and reaps until it has no child left. So
once its report is read nothing the command started runs any more. SPEC.md section 15.3
("Lifetime of a worker") states the guarantee; this file is its only implementation.

The protocol, both ends of which live here (:func:`encode_spec`, :func:`parse_report`):

- ``SPEC_FD``: the order as NUL-separated fields (:func:`encode_spec`): a tag, the time
  limit and the kill grace period in ns, the descriptor of the command's stdout log, its
  working directory, its argument count, its arguments and its environment
  (``NAME=value``). Its stderr log is the supervisor's own stderr.
- stdin, the control pipe: the byte ``T`` asks for a stop (``SIGTERM`` to the command's
  process group, ``SIGKILL`` to every descendant after the grace period, or at once when
  the command exits). End of file means the runner died: every descendant is killed at
  once. A pipe rather than ``PR_SET_PDEATHSIG``: that signal fires when the *thread* that
  forked exits, and the runner forks from pool threads that may end before it does.
- stdout, the report: ``started <pid>`` once the command runs, then ``ended <exit code>
  <timed out 0|1> <duration ns>`` once every descendant is dead and reaped; or one line
  ``refused <detail>`` when the command never started.
- ``SIGTERM``, ``SIGINT`` or ``SIGHUP`` sent to the supervisor itself count as a stop.
"""

from __future__ import annotations

# Imports are few and cheap: one supervisor starts per attempt, and ``subprocess``,
# ``contextlib`` and ``signal`` (which imports ``enum``) cost more than the interpreter's own
# start; ``_signal`` is the C module behind ``signal``.
import _signal as signal  # type: ignore[import-not-found,unused-ignore]
import ctypes
import os
import select
import sys
import time

SPEC_TAG = b"runstore-supervise-1"
STOP = b"T"

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

_LIBC = ctypes.CDLL(None, use_errno=True)


def encode_spec(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    *,
    timeout_ns: int,
    grace_ns: int,
    stdout_fd: int,
) -> bytes:
    """The order as the supervisor reads it from ``SPEC_FD``. Refuses (ValueError) a NUL
    in any argument, name or value (no ``execve`` could pass it) and a ``=`` in a name."""
    if any("=" in name for name in env):
        raise ValueError("an environment name holds '='")
    fields = [
        SPEC_TAG,
        b"%d" % timeout_ns,
        b"%d" % grace_ns,
        b"%d" % stdout_fd,
        os.fsencode(cwd),
        b"%d" % len(argv),
        *map(os.fsencode, argv),
        *(os.fsencode(f"{name}={value}") for name, value in env.items()),
    ]
    if any(b"\0" in field for field in fields):
        raise ValueError("embedded null byte")
    return b"\0".join(fields)


def parse_report(data: bytes) -> tuple[int | None, str | None, tuple[int, bool, int] | None]:
    """The report's three parts: the command's pid once it started, the refusal's detail,
    and ``(exit code, timed out, duration ns)`` once it ended and every descendant died
    (None where the supervisor did not say: it died first)."""
    started: int | None = None
    refused: str | None = None
    ended: tuple[int, bool, int] | None = None
    for line in data.decode("utf-8", "replace").splitlines():
        word, _, rest = line.partition(" ")
        try:
            if word == "started":
                started = int(rest)
            elif word == "refused":
                refused = rest
            elif word == "ended":
                code, timed_out, duration = rest.split()
                ended = (int(code), timed_out == "1", int(duration))
        except ValueError:
            pass
    return started, refused, ended


def become_subreaper() -> str:
    """Make this process a child subreaper and check that it can see its children; return
    what this machine lacks ("" when nothing). Changes the calling process for good: only
    the supervisor (or a test's throwaway process) calls it."""
    if not sys.platform.startswith("linux"):
        return f"no child subreaper on {sys.platform} (Linux only)"
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return f"no child subreaper here (prctl: {os.strerror(ctypes.get_errno())})"
    flag = ctypes.c_int(0)
    if _LIBC.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0 or flag.value != 1:
        return "no child subreaper here (prctl did not take)"
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children", "rb"):
            pass
    except OSError as error:
        return f"no children lists in /proc here ({error.strerror})"
    return ""


def _report(line: str) -> None:
    """One report line, unbuffered; a runner that is gone reads nothing, which is fine."""
    try:  # noqa: SIM105 (no contextlib: see the imports)
        os.write(1, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _children(pid: int) -> list[int]:
    """The children of ``pid``, each thread's (a thread that forked is their parent)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as listing:
                found.extend(int(child) for child in listing.read().split())
        except (OSError, ValueError):
            pass
    return found


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _kill(pid: int, parents: tuple[int, ...]) -> bool:
    """SIGKILL ``pid`` if it is still a child of one of ``parents`` (checked through a pidfd
    where the kernel has them, so a pid reused meanwhile is never signalled); whether it
    was."""
    try:
        handle: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):  # no pidfd here: the parent check alone remains
        handle = None
    try:
        if _parent(pid) not in parents:
            return False
        if handle is None:
            os.kill(pid, signal.SIGKILL)
        else:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        if handle is not None:
            os.close(handle)


def _kill_descendants() -> None:
    """SIGKILL every descendant, top down: a process is signalled before its children are
    listed, and one with SIGKILL pending forks no more, so its list is final. Whatever
    dies before its children are listed leaves them to this subreaper: the next round."""
    me = os.getpid()
    pending = [me]
    while pending:
        parent = pending.pop()
        for child in _children(parent):
            if parent == me:  # our own child: its pid is ours until we reap it
                try:  # noqa: SIM105 (no contextlib: see the imports)
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pending.append(child)
            elif _kill(child, (parent, me)):
                pending.append(child)


class _Supervisor:
    def __init__(self, worker: int, wake: int) -> None:
        self.worker, self.wake = worker, wake
        self.code: int | None = None
        self.ended_ns = 0
        self.poll = select.poll()
        self.poll.register(0, select.POLLIN)
        self.poll.register(wake, select.POLLIN)

    def reap(self) -> bool:
        """Reap every dead child, noting the command's exit; False once none is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.worker:
                self.code = os.waitstatus_to_exitcode(status)
                self.ended_ns = time.monotonic_ns()

    def wait(self, timeout_ns: int) -> tuple[bool, bool]:
        """Sleep until something happens, at most ``timeout_ns``: whether a stop was asked
        (a ``T``, a signal to us) and whether the runner is gone (end of file)."""
        stop = gone = False
        timeout_ms = min(max(0, -(-timeout_ns // 1_000_000)), 60_000)  # poll takes an int
        for fd, _ in self.poll.poll(timeout_ms):
            if fd == self.wake:
                try:
                    woken = os.read(self.wake, 256)
                except BlockingIOError:
                    continue
                stop |= any(s != signal.SIGCHLD for s in woken)
            else:
                data = os.read(0, 256)
                if not data:
                    self.poll.unregister(0)
                    gone = True
                stop |= STOP in data
        return stop, gone

    def run(self, began_ns: int, timeout_ns: int, grace_ns: int) -> tuple[bool, bool]:
        """Until the command exits, the runner dies or a stop's grace period ends; returns
        (timed out, runner gone). Nothing is killed here but the group's SIGTERM."""
        deadline, kill_at, timed_out = began_ns + timeout_ns, None, False
        while self.reap() and self.code is None:
            now = time.monotonic_ns()
            if kill_at is None and now >= deadline:
                timed_out, kill_at = True, self.terminate(now, grace_ns)
            if kill_at is not None and now >= kill_at:
                break
            stop, gone = self.wait((kill_at if kill_at is not None else deadline) - now)
            if gone:
                return timed_out, True
            if stop and kill_at is None:
                kill_at = self.terminate(time.monotonic_ns(), grace_ns)
        return timed_out, False

    def terminate(self, now_ns: int, grace_ns: int) -> int:
        try:  # noqa: SIM105 (no contextlib: see the imports)
            os.killpg(self.worker, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        return now_ns + grace_ns

    def kill_all(self) -> None:
        """SIGKILL every descendant and reap until no child is left."""
        woken = select.poll()
        woken.register(self.wake, select.POLLIN)
        while True:
            _kill_descendants()
            if not self.reap():
                return
            if woken.poll(10):  # a SIGCHLD; the round after kills what came meanwhile
                try:  # noqa: SIM105 (no contextlib: see the imports)
                    os.read(self.wake, 256)
                except BlockingIOError:
                    pass


_RESTORED = ("SIGPIPE", "SIGXFZ", "SIGXFSZ")
"""Signals Python ignores that a command must get with their default action, as
``subprocess`` restores them (``restore_signals``)."""


def spawn(argv: list[str], env: dict[str, str], cwd: str, stdout_fd: int) -> int:
    """Start the command and return its pid once it runs: in a session of its own, in
    ``cwd``, stdin ``/dev/null``, stdout ``stdout_fd``, stderr ours, no other descriptor
    open, the signals Python ignores restored, killed when this process dies
    (``PR_SET_PDEATHSIG``, checked against a death before it was set), the program found
    on ``env``'s ``PATH``. What ``subprocess.Popen`` with ``start_new_session``,
    ``close_fds`` and a ``preexec_fn`` does, without importing it (its import costs more
    than the rest of this process's start). A failure before the ``exec`` comes back over a
    close-on-exec pipe and is raised here as the ``OSError`` the child met (``filename``:
    the directory when ``chdir`` failed, else the program)."""
    me = os.getpid()
    failed_read, failed_write = os.pipe2(os.O_CLOEXEC)
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: nothing here may return or raise
        where = argv[0] if argv else ""
        try:
            os.setsid()
            os.dup2(null, 0)
            os.dup2(stdout_fd, 1)
            os.closerange(3, failed_write)
            os.closerange(failed_write + 1, os.sysconf("SC_OPEN_MAX"))
            for name in _RESTORED:
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
            where = cwd
            os.chdir(cwd)
            where = argv[0] if argv else ""
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != me:  # the supervisor died before the line above
                os.kill(os.getpid(), signal.SIGKILL)
            os.execvpe(argv[0], argv, env)
        except BaseException as error:
            number = getattr(error, "errno", None) or 0
            failure = f"{number}\0{where}\0{error}".encode("utf-8", "replace")
            try:
                os.write(failed_write, failure)
            finally:
                os._exit(127)
    os.close(failed_write)
    os.close(null)
    with os.fdopen(failed_read, "rb") as failed:
        report = failed.read()
    if not report:
        return pid
    os.waitpid(pid, 0)
    number_text, where, message = report.decode("utf-8", "replace").split("\0", 2)
    number = int(number_text)
    if number:
        raise OSError(number, os.strerror(number), where)
    raise OSError(message or "the command could not be started")


def _read_spec(fd: int) -> tuple[list[str], dict[str, str], str, int, int, int]:
    with os.fdopen(fd, "rb") as file:
        fields = file.read().split(b"\0")
    if fields[0] != SPEC_TAG:
        raise ValueError(f"not a spec of this runstore: {fields[0][:40]!r}")
    timeout_ns, grace_ns, stdout_fd, argc = map(int, (*fields[1:4], fields[5]))
    argv = [os.fsdecode(field) for field in fields[6 : 6 + argc]]
    env = dict(os.fsdecode(field).split("=", 1) for field in fields[6 + argc :])
    return argv, env, os.fsdecode(fields[4]), timeout_ns, grace_ns, stdout_fd


def main(arguments: list[str]) -> int:
    argv, env, cwd, timeout_ns, grace_ns, stdout_fd = _read_spec(int(arguments[0]))
    lacking = become_subreaper()
    if lacking:
        _report(f"refused {lacking}")
        return 0
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)  # a Python handler, so the wake pipe hears it
    if select.select([0], [], [], 0)[0]:  # asked to stop, or orphaned, before the start
        if STOP in os.read(0, 256):
            _report("refused cancelled before it started")
        return 0
    began = time.monotonic_ns()
    try:
        worker = spawn(argv, env, cwd, stdout_fd)
    except OSError as error:
        _report(f"refused {str(error).splitlines()[0] if str(error) else type(error).__name__}")
        return 0
    _report(f"started {worker}")
    supervisor = _Supervisor(worker, wake_read)
    try:
        timed_out, runner_gone = supervisor.run(began, timeout_ns, grace_ns)
    finally:  # even on a bug here: nothing the command started may outlive this process
        supervisor.kill_all()
    if not runner_gone:
        code = supervisor.code if supervisor.code is not None else -signal.SIGKILL
        duration = (supervisor.ended_ns or time.monotonic_ns()) - began
        _report(f"ended {code} {int(timed_out)} {duration}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
