# ldscope's Python hook, loaded by its sitecustomize.py only while a collector listens
# on $LDSCOPE_SOCKET (run with exec: it never appears in sys.modules). It tells the
# collector what only Python knows about library loads, over a connection of its own;
# the collector turns what it sends into the events of proto/events.proto (PyStart,
# PyImportBegin, PyImportEnd, PyDlopen):
#   - each import's begin and end, with the import statement's file and line: importlib's
#     _find_and_load (behind every import statement, __import__ and import_module) holds
#     the module's lock through the class _ModuleLockManager, looked up by name each
#     time; a subclass notes when it holds the lock of a module not yet in
#     sys.modules, and when it lets go (with the exception, if any). Its methods return
#     before the import runs and after it has ended, so they never appear in the
#     program's tracebacks or stacks.
#   - each ctypes dlopen, with the call site and stack: ctypes.CDLL.__init__ sets
#     self._name just before it calls dlopen; once ctypes is imported, CDLL gets a
#     __setattr__ that reports that assignment and then does exactly what object's does.
#     (PEP 578's "ctypes.dlopen" audit event says the same, but an audit hook is called
#     for every audited operation, about 3,000 of them in `import numpy`, and that cost
#     more than all the rest of the hook together: bench/python-hook.)
# The collector ties these to the audit library's events of the same process and thread
# by time (CLOCK_MONOTONIC on both sides), so every load gets the innermost import, the
# line that triggered it and the user's top-level import.
#
# What an import costs is what bench/python-hook measures (instructions): it appends one
# tuple of raw facts at its begin and one at its end, nothing else; the queue goes out as
# a datagram of marshal data (one C call), which the collector reads and converts into
# the protobuf events (collector/ipc/pyhook.h has the format: keep the two in step).
#
# Never changes the program: prints nothing, lets no exception of its own escape (a
# failure makes it go quiet for good), waits at most 500 ms for a stalled collector
# and then drops (counted), never writes to a descriptor that is no longer its own,
# and keeps its descriptor away from the low numbers. Events go out in batches, at the
# latest when the top-level import they belong to ends; a ctypes dlopen's event goes out
# at once, before the dlopen.
import os
import sys
import _socket
import _thread
import marshal
import time

_monotonic_ns = time.monotonic_ns
_native_id = _thread.get_native_id
_getframe = sys._getframe
_getdlopenflags = sys.getdlopenflags
_fstat = os.fstat
_getpid = os.getpid
_dumps = marshal.dumps
_modules = sys.modules
_MSG_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0x4000)
_SEND_FLAGS = _MSG_NOSIGNAL | getattr(_socket, "MSG_DONTWAIT", 0x40)  # no poll() first
_WAIT_S = 0.5
_HIGH_FD = 600
_MAX_FRAMES = 8
_MAX_BYTES = 4096    # the collector cuts a longer string (and flags its event truncated)
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()
# marshal writes a str as UTF-8 with its lone surrogates as they are, which the collector
# turns into the bytes os.fsencode gives, as long as that is UTF-8 with surrogateescape;
# under any other file-system encoding the strings are encoded here (_plain).
_RAW = _FS_ENCODING == "utf-8" and _FS_ERRORS == "surrogateescape"
_HOOK_FILES = (__file__, __file__[:-3] + ".pyc")
# The import statement's line: f_lineno walks the code's line table from its start at
# every import, which cost more than all the rest in a long module. Where the table's
# format is known (Objects/locations.md, CPython 3.11 and 3.12), the event carries the
# table (the same bytes object for every import of that code, so marshal writes it once
# per datagram) and the instruction's offset, and the collector finds the line.
_RAW_LINES = sys.implementation.name == "cpython" and sys.version_info[:2] in ((3, 11), (3, 12))
_MAGIC = b"\x00\x01"  # no protobuf Event or EventBatch starts with a zero byte

_path = None
_sock = None
_fd = -1
_ino = None
_pid = 0
_seq = 0             # the next event's sequence number on this connection
_dropped = 0
_stalled = False
_dead = True
_fork_seen = False   # os.fork ran in this process since the last event (see _child)
_hook_modules = ()
# Events not sent yet, in order, as tuples (the datagram format, collector/ipc/pyhook.h):
#   (0, tid, mono_ns, module, dlopen flags[, file, line, function]): PyImportBegin;
#   (4, tid, mono_ns, module, dlopen flags, file, function, line table, first line,
#    offset): PyImportBegin, its line to be found (_RAW_LINES);
#   (1, tid, mono_ns, module[, error]): PyImportEnd;
#   (2, tid, mono_ns, executable, version, hook modules, forked): PyStart;
#   (3, tid, mono_ns, name, via, mode or None, ((file, line, function), ...)): PyDlopen.
_queue = []
_append = _queue.append
_depth = {}          # native thread id -> imports in progress on it (0: none)
_BATCH_EVENTS = 160
_MAX_DATAGRAM = 60 * 1024   # the collector takes up to 64 KiB
_keep = set()        # file names of importing frames
_skip = set()        # file names of the import machinery's frames and the hook's
_importlib_file = None


def _bytes(s):
    # The bytes the OS has (os.fsencode): a file name that is not valid UTF-8 reaches
    # Python with surrogate escapes (co_filename, sys.executable, sys.path entries).
    # The unbound method: a str subclass's own encode is never run.
    try:
        return str.encode(s, _FS_ENCODING, _FS_ERRORS)
    except UnicodeError:  # lone surrogates no decoder made
        return str.encode(s, "utf-8", "backslashreplace")


def _plain(v, cut):
    # What marshal takes, for the rare event it does not (a str or bytes subclass from the
    # program, a string too long for a datagram) and for any file-system encoding but
    # UTF-8: strings as exact bytes (cut short enough when cut; the collector still sees
    # that they were longer than it keeps), tuples item by item.
    t = type(v)
    if t is tuple:
        return tuple([_plain(x, cut) for x in v])
    if isinstance(v, str):
        v = _bytes(v)
    elif isinstance(v, bytes):
        v = b"".join((v,))
    else:
        return v
    return v[:_MAX_BYTES + 1] if cut else v


def _line(table, line, offset):
    # PyCode_Addr2Line (CPython 3.11, 3.12) of the location table: the line of the code
    # unit at byte offset `offset`, None where it has none (what f_lineno says). The
    # collector has the same (ipc/pyhook.cc); this one is for the rare event sent as a
    # line already (_plain).
    if offset < 0:
        return line
    end, i, n = 0, 0, len(table)
    while i < n:
        b = table[i]
        code = (b >> 3) & 15
        if code == 13 or code == 14:  # a signed varint follows: 6 bits a byte, bit 6 more
            k, shift, val = i + 1, 0, 0
            while k < n:
                val |= (table[k] & 63) << shift
                shift += 6
                k += 1
                if not table[k - 1] & 64:
                    break
            line += -(val >> 1) if val & 1 else val >> 1
        elif 10 <= code <= 12:
            line += code - 10
        end += ((b & 7) + 1) * 2
        if offset < end:
            return None if code == 15 else line
        i += 1
        while i < n and not table[i] & 128:
            i += 1
    return None


def _lined(e):
    # An event with its line found (kind 4 as kind 0).
    if e[0] != 4:
        return e
    return (0,) + e[1:6] + (_line(e[7], e[8], e[9]), e[6])


def _flush():
    # Sends the queue, when asked, when it is long, and whenever a top-level import ends,
    # so that only the events of an import still in progress can wait in it. Without a
    # lock (a signal handler or another thread may add events meanwhile): slicing and
    # deleting a list prefix are each atomic, and appends go after it; the events' sequence
    # numbers are taken with them, before any call (no other thread runs in between).
    global _seq
    n = len(_queue)
    if n == 0 or _dead:
        return
    events = _queue[:n]
    del _queue[:n]
    seq = _seq
    _seq = seq + n
    try:
        if _getpid() != _pid:
            # A fork that os.fork did not report (a C library's fork()): the queue
            # holds events of both processes; the child's connection starts afresh.
            _forked()
            return
        s = _fstat(_fd)
        if (s.st_dev, s.st_ino) != _ino:
            _die()   # no longer ours (the program closed or reused the number)
            return
        _post(events, seq, False)
    except Exception:
        _die()


def _post(events, seq, cut):
    # Datagrams of at most _MAX_DATAGRAM bytes: the header (pid, the first event's
    # sequence number, the drop count) and the events, marshalled.
    global _dropped
    data = None
    if _RAW and not cut:
        try:
            data = _dumps((_pid, seq, _dropped, events), 4)
        except ValueError:  # an object marshal does not take
            pass
    if data is None:
        events = [_plain(_lined(e), cut) for e in events]
        data = _dumps((_pid, seq, _dropped, events), 4)
    n = len(events)
    if len(data) > _MAX_DATAGRAM:
        if n > 1:
            _post(events[:n // 2], seq, cut)
            _post(events[n // 2:], seq + n // 2, cut)
        elif not cut:
            _post(events, seq, True)
        else:
            _dropped += 1   # still too long (a ctypes stack of long names): dropped, counted
        return
    _deliver(_MAGIC + data, n)


def _deliver(data, count):
    # One datagram. A full collector queue gets at most _WAIT_S to make room, unless the
    # last datagram already waited in vain: then drop at once until a send works again.
    global _dropped, _stalled
    try:
        _sock.send(data, _SEND_FLAGS)
        _stalled = False
    except (BlockingIOError, InterruptedError):
        if _stalled:
            _dropped += count
            return
        try:
            _sock.settimeout(_WAIT_S)
            _sock.send(data, _MSG_NOSIGNAL)
        except (BlockingIOError, InterruptedError, TimeoutError, _socket.timeout):
            _dropped += count
            _stalled = True
        finally:
            _sock.settimeout(None)


def _send(kind, *fields):
    # A rare event (PyStart, a failed import's end, a ctypes dlopen), sent at once.
    try:
        if _fork_seen:
            _forked()
        if _dead:
            return
        _append((kind, _native_id(), _monotonic_ns()) + fields)
        _flush()
    except Exception:
        _die()  # stay out of the way from now on


def _die():
    # Go quiet for good. Forget the descriptor unless it is still ours, so that the
    # socket object, when Python finalizes it, never closes the program's descriptor.
    global _dead
    _dead = True
    try:
        s = _fstat(_fd)
        if (s.st_dev, s.st_ino) == _ino:
            return
    except Exception:
        pass
    try:
        _sock.detach()
    except Exception:
        pass


def _own_user(uid):
    return uid == 0 or uid == os.getuid() or uid == os.geteuid()


def _trusted_dir(path):
    # The rule the audit library keeps (audit/transport.h, README "Security"): the
    # socket's directory is this user's or root's, and not writable by others unless it
    # has the sticky bit.
    d = path[:path.rfind("/")] or "/" if "/" in path else "."
    st = os.stat(d)
    return (st.st_mode & 0o170000 == 0o040000 and _own_user(st.st_uid)
            and (not st.st_mode & 0o002 or st.st_mode & 0o1000))


def _trusted_peer(s):
    # struct ucred {pid_t pid; uid_t uid; gid_t gid;}: the listener's user.
    cred = s.getsockopt(_socket.SOL_SOCKET, getattr(_socket, "SO_PEERCRED", 17), 12)
    return len(cred) == 12 and _own_user(int.from_bytes(cred[4:8], sys.byteorder))


def _connect(in_child):
    global _sock, _fd, _ino, _pid, _seq, _dropped, _stalled, _dead
    _dead = True
    try:
        if not _trusted_dir(_path):
            return
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            s.settimeout(_WAIT_S)
            s.connect(_path)
            if not _trusted_peer(s):
                s.close()
                return
            fd = s.detach()
        except Exception:
            s.close()
            raise
        try:
            for n in range(_HIGH_FD, _HIGH_FD + 64):
                try:
                    _fstat(n)
                except OSError:
                    os.dup2(fd, n, inheritable=False)
                    os.close(fd)
                    fd = n
                    break
            else:
                raise OSError("no descriptor out of the program's way")
        except Exception:
            os.close(fd)  # never left at a number the program could get
            raise
        _sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
        _sock.settimeout(None)
        st = _fstat(fd)
        _fd, _ino, _pid = fd, (st.st_dev, st.st_ino), _getpid()
        _seq, _dropped, _stalled, _dead = 0, 0, False, False
        _send(2, sys.executable or "", "%d.%d.%d" % sys.version_info[:3],
              () if in_child else _hook_modules, in_child)
    except Exception:
        _dead = True


def _child():
    # os.fork's after-in-child callback: only a note, acted on at the child's first event.
    global _fork_seen
    _fork_seen = True


def _forked():
    # The first event of a child after a fork: the inherited descriptor is the parent's
    # connection, and the queued events are the parent's to send. Close our copy; open
    # the child's own.
    global _fork_seen
    _fork_seen = False
    del _queue[:]
    try:
        s = _fstat(_fd)
        if (s.st_dev, s.st_ino) == _ino:
            _sock.close()
        else:
            _sock.detach()
    except Exception:
        pass
    _connect(True)


def _importer(fn):
    # Whether frames of file fn are the import's site: not the import machinery
    # (importlib's frozen modules, importlib.import_module), not the hook.
    global _importlib_file
    if _importlib_file is None:
        _importlib_file = getattr(_modules.get("importlib"), "__file__", None)
    if fn.startswith("<frozen importlib") or fn in _HOOK_FILES or fn == _importlib_file:
        if len(_skip) < 4096:
            _skip.add(fn)
        return False
    if len(_keep) < 4096:
        _keep.add(fn)
    return True


def _failed(name, tid, exc):
    t = type(exc)
    text = t.__name__
    if t.__module__ == "builtins":  # never run the program's own __str__
        text = "%s: %s" % (text, exc)
    _append((1, tid, _monotonic_ns(), name, text))


def _patch_ctypes():
    ctypes = _modules.get("ctypes")
    cdll = getattr(ctypes, "CDLL", None)
    if cdll is None or "__setattr__" in cdll.__dict__:
        return
    ctypes_file = getattr(ctypes, "__file__", None)
    base_setattr = cdll.__setattr__

    def __setattr__(self, name, value):
        if name == "_name" and not _dead:
            try:
                _dlopen(self, value, ctypes_file)
            except Exception:
                pass
        base_setattr(self, name, value)

    __setattr__.__qualname__ = cdll.__qualname__ + ".__setattr__"
    cdll.__setattr__ = __setattr__


def _stack(f, skip, limit):
    # Innermost first, without the import machinery, the hook, and leading frames of
    # `skip` (ctypes itself).
    out = []
    while f is not None and len(out) < limit:
        co = f.f_code
        fn = co.co_filename
        if not (fn.startswith("<frozen importlib") or fn in _HOOK_FILES or (not out and fn == skip)):
            out.append((fn, f.f_lineno, co.co_name))
        f = f.f_back
    return tuple(out)


def _dlopen(lib, name, ctypes_file):
    if not isinstance(name, (str, bytes)) or not name:
        return  # dlopen(NULL): the program itself, nothing to load
    t = type(lib)
    via = ("ctypes." + t.__name__) if t.__module__ == "ctypes" else (t.__module__ + "." + t.__qualname__)
    # <- __setattr__ <- CDLL.__init__ (ctypes) <- the call site
    init = _getframe(2)
    # The dlopen mode (RTLD_GLOBAL or not) is CDLL.__init__'s argument: the loader's
    # events do not carry it.
    mode = init.f_locals.get("mode") if init.f_code.co_name == "__init__" else None
    if not (type(mode) is int and 0 <= mode < (1 << 32)):
        mode = None
    _send(3, name, via, mode, _stack(init, ctypes_file, _MAX_FRAMES))  # sent before the dlopen


def install(path, hook_modules):
    global _path, _hook_modules
    _path, _hook_modules = path, tuple(hook_modules)
    _connect(False)
    if _dead:
        return
    try:
        os.register_at_fork(after_in_child=_child)
    except Exception:
        pass
    bootstrap = _modules.get("_frozen_importlib")
    base = getattr(bootstrap, "_ModuleLockManager", None)
    if base is None or not hasattr(base, "__enter__") or not hasattr(base, "__exit__"):
        return
    base_enter, base_exit = base.__enter__, base.__exit__

    # What the base class's methods do, done here without calling them (one Python call
    # less each way, about a tenth of what an import costs the hook), when they are
    # exactly this code (as in CPython 3.11: compared here, not assumed); else they are
    # called.
    def _enter(self):
        self._lock = _get_module_lock(self._name)
        self._lock.acquire()

    def _exit(self, *args, **kwargs):
        self._lock.release()

    inline = False
    try:
        inline = all(getattr(f, "__code__", None) is not None and
                     (f.__code__.co_code, f.__code__.co_names, f.__code__.co_consts) ==
                     (g.__code__.co_code, g.__code__.co_names, g.__code__.co_consts)
                     for f, g in ((base_enter, _enter), (base_exit, _exit)))
    except Exception:
        pass

    # importlib's _call_with_frames_removed, which only importlib calls: the walk to the
    # importing frame goes straight past its caller (one frame object fewer to make, for
    # every `from package import module`).
    cwfr = getattr(getattr(bootstrap, "_call_with_frames_removed", None), "__code__", None)

    # The per-import work, kept to one tuple each way: everything else is done at the
    # flush or by the collector.
    class _ModuleLockManager(base):
        _ldscope_import = None

        def __enter__(self):
            if inline:
                self._lock = bootstrap._get_module_lock(self._name)
                self._lock.acquire()
                r = None
            else:
                r = base_enter(self)
            if not _dead:
                try:
                    name = self._name
                    if name not in _modules and name != "sitecustomize":  # (our own chaining)
                        if _fork_seen:
                            _forked()
                            if _dead:
                                return r
                        tid = _native_id()
                        # <- _find_and_load (frozen) <- the importing frame, or importlib's
                        # import_module (skipped: its caller is the import site)
                        try:
                            f = _getframe(2)
                            if f.f_code is cwfr:
                                f = _getframe(4)
                        except ValueError:  # no Python frame below: an import made from C
                            f = None
                        while f is not None:
                            co = f.f_code
                            fn = co.co_filename
                            if fn in _keep or (fn not in _skip and _importer(fn)):
                                break
                            f = f.f_back
                        # The flags extension modules are dlopened with (RTLD_GLOBAL after
                        # sys.setdlopenflags): the loader's events do not carry them.
                        if f is None:
                            _append((0, tid, _monotonic_ns(), name, _getdlopenflags()))
                        elif _RAW_LINES:
                            _append((4, tid, _monotonic_ns(), name, _getdlopenflags(), fn,
                                     co.co_name, co.co_linetable, co.co_firstlineno, f.f_lasti))
                        else:
                            _append((0, tid, _monotonic_ns(), name, _getdlopenflags(), fn,
                                     f.f_lineno, co.co_name))
                        _depth[tid] = _depth.get(tid, 0) + 1
                        self._ldscope_import = name
                except Exception:
                    _die()  # stay out of the way from now on
            return r

        # (importlib's `with` is the only caller: always the three arguments)
        def __exit__(self, et=None, exc=None, tb=None):
            name = self._ldscope_import
            if name is not None:
                try:
                    tid = _native_id()
                    depth = _depth.get(tid, 1) - 1
                    _depth[tid] = depth
                    if _fork_seen and not _dead:
                        _forked()
                    if not _dead:
                        if exc is None:
                            _append((1, tid, _monotonic_ns(), name))
                        else:
                            _failed(name, tid, exc)
                        if depth <= 0 or len(_queue) >= _BATCH_EVENTS:
                            _flush()
                except Exception:
                    _die()
                if exc is None and name == "ctypes":
                    try:
                        _patch_ctypes()
                    except Exception:
                        pass
            if inline:
                self._lock.release()
                return None
            return base_exit(self, et, exc, tb)

    _ModuleLockManager.__module__ = base.__module__
    _ModuleLockManager.__qualname__ = base.__qualname__
    bootstrap._ModuleLockManager = _ModuleLockManager
    if "ctypes" in _modules:
        _patch_ctypes()
