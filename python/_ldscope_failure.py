# What `ldscope hook install` adds to a Python environment does at the moment of a
# loader failure. The .pth line it writes (collector/cli/hook.cc) only wraps
# sys.excepthook; when an exception ends the program, the wrapper first lets the hook it
# replaced print the traceback, then runs this file (read and compiled there and then:
# it never appears in sys.modules and no bytecode of it is written) and calls
# explain(exception, binary).
#
# explain prints nothing unless the exception, or one it was raised from or during, is
# an ImportError or OSError whose message is a loader error (the words pytest --ldscope
# looks for); then it runs `ldscope snapshot` on this very process and prints the report
# under the traceback, on standard error. It never raises, never changes the exit status
# (Python sets that after the excepthook returns, whatever it did) and waits at most
# _WAIT_S for ldscope.
import os
import re
import sys

_LOADER_ERROR = re.compile(
    r"undefined symbol|cannot open shared object file|version `[^']*' not found|static TLS|"
    r"wrong ELF class|invalid ELF header|cannot enable executable stack|failed to map segment|"
    r"cannot allocate memory in static TLS block")
_WAIT_S = 30
_PR_SET_PTRACER = 0x59616D61


def loader_error(exc):
    """The loader message of exc or of an exception in its chain, or None. Only the
    built-in __str__ of ImportError or OSError runs, never the program's own."""
    seen = set()
    while exc is not None and id(exc) not in seen and len(seen) < 64:
        seen.add(id(exc))
        for base in (ImportError, OSError):
            if isinstance(exc, base):
                try:
                    text = base.__str__(exc)
                except Exception:
                    text = ""
                if _LOADER_ERROR.search(text):
                    return text
        if exc.__cause__ is not None:
            exc = exc.__cause__
        elif not exc.__suppress_context__:
            exc = exc.__context__
        else:
            exc = None
    return None


def _yama_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return f.read().strip()
    except OSError:
        return ""


def _snapshot(binary, out_dir):
    # `ldscope snapshot` of this process: its report on standard output. Where
    # kernel.yama.ptrace_scope is 1, only a process this one names (PR_SET_PTRACER) may
    # read it: ldscope waits for a line on its standard input until this process has
    # named it.
    import subprocess
    argv = [binary, "snapshot", "-q", "--no-facts", "-o", os.path.join(out_dir, "snapshot.ldscope"),
            str(os.getpid())]
    if _yama_scope() != "1":
        return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=_WAIT_S)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    gate = ["/bin/sh", "-c", 'read _ && exec "$0" "$@"'] + argv
    p = subprocess.Popen(gate, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        libc.prctl(_PR_SET_PTRACER, p.pid, 0, 0, 0)
        try:
            out, err = p.communicate(b"\n", timeout=_WAIT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
    finally:
        libc.prctl(_PR_SET_PTRACER, 0, 0, 0, 0)
    return subprocess.CompletedProcess(gate, p.returncode, out, err)


def explain(exc, binary):
    try:
        error = loader_error(exc)
        if error is None:
            return
        if isinstance(binary, bytes):
            binary = os.fsdecode(binary)
        write = sys.stderr.write
        write("\nldscope hook: a loader error ended this program: %s\n" % error)
        import shutil
        import tempfile
        out_dir = tempfile.mkdtemp(prefix="ldscope-hook-")
        try:
            done = _snapshot(binary, out_dir)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        if done.returncode not in (0, 3):
            reason = done.stderr.decode("utf-8", "replace").strip() or "ldscope exited %d" % done.returncode
            write("ldscope hook: could not read this process: %s\n" % reason)
            return
        write("ldscope hook: what this process had loaded then, read by `ldscope snapshot`; the load that failed "
              "left nothing behind (`ldscope run -- COMMAND` traces it):\n")
        write(done.stdout.decode("utf-8", "replace"))
        sys.stderr.flush()
    except Exception as e:  # never more than one line of its own
        try:
            sys.stderr.write("ldscope hook: %s: %s\n" % (type(e).__name__, e))
        except Exception:
            pass
