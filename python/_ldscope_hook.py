# ldscope's Python hook, loaded by its sitecustomize.py only while a collector listens
# on $LDSCOPE_SOCKET (run with exec: it never appears in sys.modules). It tells the
# collector what only Python knows about library loads, over a connection of its own,
# in the event schema of proto/events.proto (PyStart, PyImportBegin, PyImportEnd,
# PyDlopen, encoded by hand below):
#   - each import's begin and end, with the import statement's file and line: importlib's
#     _find_and_load (behind every import statement, __import__ and import_module) holds
#     the module's lock through the class _ModuleLockManager, looked up by name each
#     time; a subclass reports when it holds the lock of a module not yet in
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
import itertools
import time

_monotonic_ns = time.monotonic_ns
_native_id = _thread.get_native_id
_get_ident = _thread.get_ident
_getframe = sys._getframe
_getdlopenflags = sys.getdlopenflags
_fstat = os.fstat
_getpid = os.getpid
_modules = sys.modules
_MSG_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0x4000)
_SEND_FLAGS = _MSG_NOSIGNAL | getattr(_socket, "MSG_DONTWAIT", 0x40)  # no poll() first
_WAIT_S = 0.5
_HIGH_FD = 600
_MAX_FRAMES = 8
_MAX_BYTES = 4096    # a longer string is cut, and its event flagged truncated
_FS_ENCODING = sys.getfilesystemencoding()
_FS_ERRORS = sys.getfilesystemencodeerrors()
_HOOK_FILES = (__file__, __file__[:-3] + ".pyc")

_path = None
_sock = None
_fd = -1
_ino = None
_pid = 0
_head = b""          # the encoded pid field, the same in every event of a connection
_seq = None
_dropped = 0
_stalled = False
_dead = True
_hook_modules = ()
_queue = []          # encoded events not sent yet (see _send)
_queued_bytes = 0
_depth = {}          # thread ident -> imports in progress on it
_cut = set()         # threads whose event being encoded had a string cut (see _send)
_BATCH_BYTES = 16 * 1024
_MAX_DATAGRAM = 60 * 1024   # the collector takes up to 64 KiB


# The protobuf wire format (field numbers: proto/events.proto).
_SMALL = [bytes((i,)) for i in range(128)]


def _uv(n):
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes(s):
    # The bytes the OS has (os.fsencode): a file name that is not valid UTF-8 reaches
    # Python with surrogate escapes (co_filename, sys.executable, sys.path entries).
    if isinstance(s, bytes):
        return s
    try:
        return s.encode(_FS_ENCODING, _FS_ERRORS)
    except UnicodeError:  # lone surrogates no decoder made
        return s.encode("utf-8", "backslashreplace")


def _str(tag, s):
    # tag: the field's key byte (field << 3 | 2). The fields are `bytes`: any bytes go,
    # and a cut through a multi-byte character is just a shorter byte string.
    if not s:
        return b""
    b = _bytes(s)
    if len(b) > _MAX_BYTES:
        b = b[:_MAX_BYTES]
        _cut.add(_get_ident())
    return tag + _uv(len(b)) + b


def _frame(f):
    co = f.f_code
    body = _str(b"\x0a", co.co_filename) + b"\x10" + _uv(f.f_lineno or 0) + _str(b"\x1a", co.co_name)
    return b"\x12" + _uv(len(body)) + body   # PyFrame in field 2 (stack)


def _stack(f, skip, limit):
    # Innermost first, without the import machinery, the hook, and leading frames of
    # `skip` (ctypes itself). A frame's line number costs a walk of its code's line
    # table: take no more than needed.
    out = []
    while f is not None and len(out) < limit:
        fn = f.f_code.co_filename
        if not (fn.startswith("<frozen importlib") or fn in _HOOK_FILES or (not out and fn == skip)):
            out.append(_frame(f))
        f = f.f_back
    return b"".join(out)


def _send(key, body, flush=False):
    # Encodes one event (key: the body's key in Event, field << 3 | 2 as a varint) and
    # queues it; the queue goes out as one datagram (an EventBatch: entries of field 1)
    # when asked, when it is big, and whenever a top-level import ends (_end), so that
    # only the events of an import still in progress can wait in it.
    global _queued_bytes
    try:
        cut = b""
        if _cut:
            t = _get_ident()
            if t in _cut:
                _cut.discard(t)
                cut = b"\x30\x01"   # Event.truncated: a string of this body was cut
        if _getpid() != _pid:
            _forked()
            if _dead:
                return
        ev = (_head + b"\x10" + _uv(_native_id()) + b"\x18" + _uv(next(_seq)) + b"\x20" +
              _uv(_monotonic_ns()) + (b"\x28" + _uv(_dropped) if _dropped else b"") + cut +
              key + _uv(len(body)) + body)
        _queue.append(b"\x0a" + _uv(len(ev)) + ev)
        _queued_bytes += len(ev)
        if flush or _queued_bytes >= _BATCH_BYTES:
            _flush()
    except Exception:
        _die()  # stay out of the way from now on


def _flush():
    # Without a lock (a signal handler or another thread may add events meanwhile):
    # slicing and deleting a list prefix are each atomic, and appends go after it.
    global _queued_bytes
    n = len(_queue)
    if n == 0 or _dead:
        return
    events = _queue[:n]
    del _queue[:n]
    _queued_bytes = 0
    try:
        s = _fstat(_fd)
        if (s.st_dev, s.st_ino) != _ino:
            _die()   # no longer ours (the program closed or reused the number)
            return
        start = 0
        while start < n:  # datagrams of at most _MAX_DATAGRAM bytes
            end, size = start, 0
            while end < n and (end == start or size + len(events[end]) <= _MAX_DATAGRAM):
                size += len(events[end])
                end += 1
            _deliver(b"".join(events[start:end]), end - start)
            start = end
    except Exception:
        _die()


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


def _connect(in_child):
    global _sock, _fd, _ino, _pid, _head, _seq, _dropped, _stalled, _dead
    _dead = True
    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            s.settimeout(_WAIT_S)
            s.connect(_path)
            fd = s.detach()
        except Exception:
            s.close()
            raise
        for n in range(_HIGH_FD, _HIGH_FD + 64):
            try:
                _fstat(n)
            except OSError:
                os.dup2(fd, n, inheritable=False)
                os.close(fd)
                fd = n
                break
        _sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
        _sock.settimeout(None)
        st = _fstat(fd)
        _fd, _ino, _pid = fd, (st.st_dev, st.st_ino), _getpid()
        _head = b"\x08" + _uv(_pid)
        _seq, _dropped, _stalled, _dead = itertools.count(), 0, False, False
        mods = () if in_child else _hook_modules
        _send(b"\x8a\x01", _str(b"\x0a", sys.executable) +  # PyStart, field 17
              _str(b"\x12", "%d.%d.%d" % sys.version_info[:3]) +
              b"".join(_str(b"\x1a", m) for m in mods) + (b"\x20\x01" if in_child else b""),
              flush=True)
    except Exception:
        _dead = True


def _forked():
    # The first event of a child after os.fork(): the inherited descriptor is the
    # parent's connection, and the queued events are the parent's to send. Close our
    # copy; open the child's own.
    global _queued_bytes
    del _queue[:]
    _queued_bytes = 0
    try:
        s = _fstat(_fd)
        if (s.st_dev, s.st_ino) == _ino:
            _sock.close()
        else:
            _sock.detach()
    except Exception:
        pass
    _connect(True)


_importlib_file = None


def _begin(name):
    # <- __enter__ <- _find_and_load (frozen) <- the importing frame, or importlib's
    # import_module (skipped: its caller is the import site)
    global _importlib_file
    if not _dead and name != "sitecustomize":  # (our own chaining to the original)
        if _importlib_file is None:
            _importlib_file = getattr(_modules.get("importlib"), "__file__", None)
        t = _get_ident()
        _depth[t] = _depth.get(t, 0) + 1
        # The flags extension modules are dlopened with (RTLD_GLOBAL after
        # sys.setdlopenflags): the loader's events do not carry them.
        _send(b"\x92\x01", _str(b"\x0a", name) + _stack(_getframe(2), _importlib_file, 1) +
              b"\x18" + _uv(_getdlopenflags()))  # PyImportBegin, field 18


def _end(name, exc):
    if _dead or name == "sitecustomize":
        return
    err = b""
    if exc is not None:
        t = type(exc)
        text = t.__name__
        if t.__module__ == "builtins":  # never run the program's own __str__
            text = "%s: %s" % (text, exc)
        err = b"\x10\x01" + _str(b"\x1a", text)
    t = _get_ident()
    depth = _depth.get(t, 1) - 1
    if depth > 0:
        _depth[t] = depth
    else:
        _depth.pop(t, None)
    _send(b"\x9a\x01", _str(b"\x0a", name) + err, flush=depth <= 0)  # PyImportEnd, field 19
    if name == "ctypes" and exc is None:
        _patch_ctypes()


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
    mode = (b"\x20" + _uv(mode)) if type(mode) is int and 0 <= mode < (1 << 32) else b""
    _send(b"\xa2\x01", _str(b"\x0a", name) + _stack(init, ctypes_file, _MAX_FRAMES) +
          _str(b"\x1a", via) + mode, flush=True)  # PyDlopen, field 20: sent before the dlopen


def install(path, hook_modules):
    global _path, _hook_modules
    _path, _hook_modules = path, tuple(hook_modules)
    _connect(False)
    if _dead:
        return
    bootstrap = _modules.get("_frozen_importlib")
    base = getattr(bootstrap, "_ModuleLockManager", None)
    if base is not None and hasattr(base, "__enter__") and hasattr(base, "__exit__"):

        class _ModuleLockManager(base):
            def __enter__(self):
                r = base.__enter__(self)
                try:
                    name = self._name
                    if name not in _modules:
                        self._ldscope_import = name
                        _begin(name)
                except Exception:
                    pass
                return r

            def __exit__(self, *args):
                try:
                    name = getattr(self, "_ldscope_import", None)
                    if name is not None:
                        _end(name, args[1] if len(args) > 1 else None)
                except Exception:
                    pass
                return base.__exit__(self, *args)

        _ModuleLockManager.__module__ = base.__module__
        _ModuleLockManager.__qualname__ = base.__qualname__
        bootstrap._ModuleLockManager = _ModuleLockManager
    if "ctypes" in _modules:
        _patch_ctypes()
