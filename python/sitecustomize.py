# ldscope's Python hook. `ldscope run` puts this file's directory first on PYTHONPATH,
# so every Python in the traced command tree imports it as `sitecustomize` at start-up.
# It tells the collector what only Python knows about library loads: when each import
# begins and ends, with the import statement's source line, and each ctypes dlopen
# (PEP 578 audit event "ctypes.dlopen") with the line that made it. The collector
# ties these to the audit library's events of the same process and thread by time, so
# that every load is attributed to the innermost import, the line that triggered it
# and the user's top-level import statement (proto/events.proto: PyStart and after).
#
# It must never change the program: it prints nothing, lets no exception of its own
# escape, imports nothing but _socket (and only while ldscope is collecting), removes
# its directory from sys.path again, and then runs the sitecustomize the environment
# had without it, exactly as Python would have. Python 3.8 or newer; older ones only
# get the chaining.


def _ldscope_hook(hook_dir):
    import os
    import sys

    path = os.environ.get("LDSCOPE_SOCKET")
    if sys.version_info < (3, 8) or not path:
        return
    try:
        import stat
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return  # nobody is collecting there: import nothing
    except Exception:
        return
    had_socket = "_socket" in sys.modules
    try:
        import _socket
    except Exception:
        return
    import _thread
    import itertools
    import time

    monotonic_ns = time.monotonic_ns
    native_id = _thread.get_native_id
    getframe = sys._getframe
    fstat = os.fstat
    getpid = os.getpid
    MSG_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0x4000)
    WAIT_S = 0.5            # as the audit library: bounded wait, then drop
    HIGH_FD = 600           # keep the low descriptor numbers for the program
    MAX_FRAMES = 8
    MAX_CHARS = 1024

    st = {"sock": None, "ino": None, "pid": 0, "seq": None, "dropped": 0,
          "stalled": False, "dead": True}

    # The protobuf wire format, by hand (field numbers: proto/events.proto).
    def varint(n):
        out = bytearray()
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    def ufield(num, n):
        return varint(num << 3) + varint(n) if n else b""

    def bfield(num, b):
        return varint(num << 3 | 2) + varint(len(b)) + b

    def sfield(num, s):
        if not s:
            return b""
        return bfield(num, str(s)[:MAX_CHARS].encode("utf-8", "replace"))

    hook_file = __file__ if "__file__" in globals() else ""

    def stack(frame, skip_files):
        # Innermost first, without the import machinery, the hook and skip_files.
        out = []
        f = frame
        while f is not None and len(out) < MAX_FRAMES:
            co = f.f_code
            fn = co.co_filename
            if not (fn.startswith("<frozen importlib") or fn == hook_file or
                    (not out and fn in skip_files)):
                out.append(bfield(2, sfield(1, fn) + ufield(2, f.f_lineno or 0) +
                                  sfield(3, co.co_name)))
            f = f.f_back
        return b"".join(out)

    def send(body_field, body):
        if st["dead"]:
            return
        if getpid() != st["pid"]:
            forked()
            if st["dead"]:
                return
        sock = st["sock"]
        try:
            fd = sock.fileno()
            s = fstat(fd)
            if (s.st_dev, s.st_ino) != st["ino"]:
                # Not ours any more (the program closed or reused the number).
                sock.detach()
                st["dead"] = True
                return
            seq = next(st["seq"])
            ev = (ufield(1, st["pid"]) + ufield(2, native_id()) + ufield(3, seq) +
                  ufield(4, monotonic_ns()) + ufield(5, st["dropped"]) + bfield(body_field, body))
            try:
                sock.send(ev, MSG_NOSIGNAL)
                if st["stalled"]:
                    st["stalled"] = False
                    sock.settimeout(WAIT_S)
            except (BlockingIOError, InterruptedError, TimeoutError, _socket.timeout):
                st["dropped"] += 1
                if not st["stalled"]:
                    st["stalled"] = True
                    sock.settimeout(0.0)  # no more waiting until a send succeeds
        except Exception:
            st["dead"] = True  # collector gone: stay out of the way from now on

    def connect(in_child):
        st["dead"] = True
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
            try:
                s.settimeout(WAIT_S)
                s.connect(path)
                fd = s.detach()
            except Exception:
                s.close()
                raise
            high = None
            for n in range(HIGH_FD, HIGH_FD + 64):
                try:
                    fstat(n)
                except OSError:
                    high = n
                    break
            if high is not None:
                os.dup2(fd, high, inheritable=False)
                os.close(fd)
                fd = high
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
            sock.settimeout(WAIT_S)
            s = fstat(fd)
            st.update(sock=sock, ino=(s.st_dev, s.st_ino), pid=getpid(),
                      seq=itertools.count(), dropped=0, stalled=False, dead=False)
            mods = [] if had_socket or in_child else ["_socket"]
            send(17, sfield(1, sys.executable) +
                 sfield(2, "%d.%d.%d" % sys.version_info[:3]) +
                 b"".join(sfield(3, m) for m in mods) + ufield(4, 1 if in_child else 0))
        except Exception:
            st["dead"] = True

    def forked():
        # In a child after os.fork() (seen at its first event: os.register_at_fork
        # callbacks crash some interpreters at exit). The inherited descriptor is the
        # parent's connection: close our copy, and open the child's own.
        sock = st["sock"]
        try:
            s = fstat(sock.fileno())
            if (s.st_dev, s.st_ino) == st["ino"]:
                sock.close()
            else:
                sock.detach()
        except Exception:
            pass
        connect(True)

    importlib_files = set()

    def begin(name):
        if st["dead"] or name == "sitecustomize":  # our own chaining, below
            return
        try:
            if not importlib_files:
                m = sys.modules.get("importlib")
                if m is not None and getattr(m, "__file__", None):
                    importlib_files.add(m.__file__)
            # begin <- __enter__ <- _find_and_load (frozen) <- the importing frame
            send(18, sfield(1, name) + stack(getframe(1), importlib_files))
        except Exception:
            pass

    def end(name, exc):
        if st["dead"] or name == "sitecustomize":
            return
        try:
            err = b""
            if exc is not None:
                t = type(exc)
                text = t.__name__
                # Only exceptions whose text cannot run the program's own code.
                if t.__module__ == "builtins":
                    text = "%s: %s" % (t.__name__, exc)
                err = ufield(2, 1) + sfield(3, text)
            send(19, sfield(1, name) + err)
        except Exception:
            pass

    ctypes_files = set()

    def audit(event, args):
        if event != "ctypes.dlopen" or st["dead"]:
            return
        try:
            if not ctypes_files:
                m = sys.modules.get("ctypes")
                if m is not None and getattr(m, "__file__", None):
                    ctypes_files.add(m.__file__)
            name = args[0] if args else None
            if isinstance(name, bytes):
                name = name.decode("utf-8", "replace")
            caller = getframe(1)
            via = "_ctypes.dlopen"
            if caller.f_code.co_filename in ctypes_files:
                via = "ctypes.CDLL" if caller.f_code.co_name == "__init__" else "ctypes"
            send(20, sfield(1, name if isinstance(name, str) else "") +
                 stack(caller, ctypes_files) + sfield(3, via))
        except Exception:
            pass

    connect(False)
    if st["dead"]:
        return
    try:
        sys.addaudithook(audit)
        # Import spans. importlib's _find_and_load (which runs every import statement,
        # __import__ and importlib.import_module) takes a per-module lock through the
        # _ModuleLockManager class, looked up by name each time; the lock is held while
        # the module is found and executed. A subclass that reports when it holds the
        # lock of a module not yet in sys.modules, and when it lets go (with the
        # exception, if any), gives each import's begin and end. Its methods return
        # before the import runs and after it has ended, so they never show up in the
        # program's tracebacks or stacks.
        bootstrap = sys.modules.get("_frozen_importlib")
        base = getattr(bootstrap, "_ModuleLockManager", None)
        if base is not None and hasattr(base, "__enter__") and hasattr(base, "__exit__"):

            class _ModuleLockManager(base):
                def __enter__(self):
                    r = base.__enter__(self)
                    try:
                        name = self._name
                        if name not in sys.modules:
                            self._ldscope_import = name
                            begin(name)
                    except Exception:
                        pass
                    return r

                def __exit__(self, *args):
                    try:
                        name = getattr(self, "_ldscope_import", None)
                        if name is not None:
                            end(name, args[1] if len(args) > 1 else None)
                    except Exception:
                        pass
                    return base.__exit__(self, *args)

            _ModuleLockManager.__module__ = base.__module__
            _ModuleLockManager.__qualname__ = base.__qualname__
            bootstrap._ModuleLockManager = _ModuleLockManager
    except Exception:
        pass


def _ldscope_chain(hook_dir):
    # Take our directory off sys.path again, then import the sitecustomize that Python
    # would have imported without us. If there is none, end as a missing sitecustomize
    # does (site.py ignores that ImportError): no sitecustomize in sys.modules.
    import os
    import sys

    def ours(p):
        try:
            return isinstance(p, str) and os.path.abspath(p) == hook_dir
        except Exception:
            return False

    sys.path[:] = [p for p in sys.path if not ours(p)]
    for p in [p for p in sys.path_importer_cache if ours(p)]:
        del sys.path_importer_cache[p]
    sys.modules.pop("sitecustomize", None)
    import sitecustomize  # noqa: F401  (the environment's own; ImportError if none)


def _ldscope_dir():
    import os
    return os.path.dirname(os.path.abspath(__file__))


try:
    _ldscope_hook(_ldscope_dir())
except Exception:
    pass
_ldscope_chain(_ldscope_dir())
del _ldscope_hook, _ldscope_chain, _ldscope_dir
