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
_fork_seen = False   # os.fork ran in this process since the last event (see _child)
_hook_modules = ()
# Events not sent yet, in order, as raw tuples: the work of encoding them is done at
# _flush, in one loop, rather than in the import it describes (see _encode).
#   (0, tid, mono_ns, name, filename, line, function, dlopen flags): PyImportBegin,
#        filename None when no frame outside the import machinery was found;
#   (1, tid, mono_ns, name): PyImportEnd without an error;
#   (key, tid, mono_ns, body, cut): any other event, its body encoded already.
_queue = []
_depth = {}          # thread ident -> imports in progress on it
_BATCH_EVENTS = 160  # about 16 KiB encoded
_MAX_DATAGRAM = 60 * 1024   # the collector takes up to 64 KiB


# The protobuf wire format (field numbers: proto/events.proto).
_SMALL = [bytes((i,)) for i in range(128)]


def _uv(n):
    if n < 128:
        return _SMALL[n]
    if n < 16384:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_ts_hi = -1
_ts_hi_bytes = b""


def _ts(n):
    # A CLOCK_MONOTONIC timestamp: its bits from 28 up change every quarter second or
    # so; their encoding is kept.
    global _ts_hi, _ts_hi_bytes
    if n < 268435456:
        return _uv(n)
    hi = n >> 28
    if hi != _ts_hi:
        _ts_hi_bytes = _uv(hi)
        _ts_hi = hi
    return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, ((n >> 14) & 0x7F) | 0x80,
                  ((n >> 21) & 0x7F) | 0x80)) + _ts_hi_bytes


def _bytes(s):
    # The bytes the OS has (os.fsencode): a file name that is not valid UTF-8 reaches
    # Python with surrogate escapes (co_filename, sys.executable, sys.path entries).
    if isinstance(s, bytes):
        return s
    try:
        return s.encode(_FS_ENCODING, _FS_ERRORS)
    except UnicodeError:  # lone surrogates no decoder made
        return s.encode("utf-8", "backslashreplace")


_lp_cache = {}       # string -> (its length-prefixed bytes, whether they were cut)


def _lp(s):
    # The fields are `bytes`: any bytes go, and a cut through a multi-byte character is
    # just a shorter byte string. Module and file names repeat (an import's begin and
    # end, a module's many imports): kept once encoded.
    r = _lp_cache.get(s)
    if r is None:
        b = _bytes(s)
        cut = len(b) > _MAX_BYTES
        if cut:
            b = b[:_MAX_BYTES]
        r = (_uv(len(b)) + b, cut)
        if len(_lp_cache) < 8192:
            _lp_cache[s] = r
    return r


def _str(tag, s, cut):
    # tag: the field's key byte (field << 3 | 2); an empty string is left out. cut: a
    # list whose first item is set when a string was cut.
    if not s:
        return b""
    b, c = _lp(s)
    if c:
        cut[0] = True
    return tag + b


def _frame(f, cut):
    co = f.f_code
    body = _str(b"\x0a", co.co_filename, cut) + b"\x10" + _uv(f.f_lineno or 0) + _str(b"\x1a", co.co_name, cut)
    return b"\x12" + _uv(len(body)) + body   # PyFrame in field 2 (stack)


def _stack(f, skip, limit, cut):
    # Innermost first, without the import machinery, the hook, and leading frames of
    # `skip` (ctypes itself). A frame's line number costs a walk of its code's line
    # table: take no more than needed.
    out = []
    while f is not None and len(out) < limit:
        fn = f.f_code.co_filename
        if not (fn.startswith("<frozen importlib") or fn in _HOOK_FILES or (not out and fn == skip)):
            out.append(_frame(f, cut))
        f = f.f_back
    return b"".join(out)


_tid_head = {}       # tid -> the encoded pid and tid fields (per connection)


def _encode(e, seq, sm=_SMALL):
    # One queued event as an EventBatch entry (field 1).
    k = e[0]
    cut = False
    if k == 0:  # PyImportBegin, field 18
        key = b"\x92\x01"
        name, fn = e[3], e[4]
        nb, cut = _lp(name) if name else (None, False)
        if fn is not None:
            fb, c1 = _lp(fn) if fn else (None, False)
            cb, c2 = _lp(e[6]) if e[6] else (None, False)
            line = e[5] or 0
            frame = b"".join(((b"\x0a" + fb) if fb else b"", b"\x10", sm[line] if line < 128 else _uv(line),
                              (b"\x1a" + cb) if cb else b""))
            n = len(frame)
            frame = b"\x12" + (sm[n] if n < 128 else _uv(n)) + frame
            cut = cut or c1 or c2
        else:
            frame = b""
        flags = e[7]
        body = b"".join(((b"\x0a" + nb) if nb else b"", frame, b"\x18",
                         sm[flags] if flags < 128 else _uv(flags)))
    elif k == 1:  # PyImportEnd, field 19
        key = b"\x9a\x01"
        nb, cut = _lp(e[3]) if e[3] else (None, False)
        body = (b"\x0a" + nb) if nb else b""
    else:
        key, body, cut = k, e[3], e[4]
    head = _tid_head.get(e[1])
    if head is None:
        head = _tid_head[e[1]] = _head + b"\x10" + _uv(e[1])
    n = len(body)
    ev = b"".join((head, b"\x18", sm[seq] if seq < 128 else _uv(seq), b"\x20", _ts(e[2]),
                   (b"\x28" + _uv(_dropped) if _dropped else b""),
                   (b"\x30\x01" if cut else b""),   # Event.truncated: a string was cut
                   key, sm[n] if n < 128 else _uv(n), body))
    n = len(ev)
    return b"\x0a" + (sm[n] if n < 128 else _uv(n)) + ev


def _send(key, body, cut, flush=False):
    # Queues an event whose body is encoded already (key: the body's key in Event,
    # field << 3 | 2 as a varint).
    try:
        if _fork_seen:
            _forked()
            if _dead:
                return
        _queue.append((key, _native_id(), _monotonic_ns(), body, cut))
        if flush or len(_queue) >= _BATCH_EVENTS:
            _flush()
    except Exception:
        _die()  # stay out of the way from now on


def _flush():
    # Sends the queue as datagrams (EventBatch: entries of field 1), when asked, when it
    # is long, and whenever a top-level import ends (_end), so that only the events of an
    # import still in progress can wait in it. Without a lock (a signal handler or
    # another thread may add events meanwhile): slicing and deleting a list prefix are
    # each atomic, and appends go after it.
    n = len(_queue)
    if n == 0 or _dead:
        return
    events = _queue[:n]
    del _queue[:n]
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
        seq = _seq
        events = [_encode(e, next(seq)) for e in events]
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
        _tid_head.clear()
        _seq, _dropped, _stalled, _dead = itertools.count(), 0, False, False
        mods = () if in_child else _hook_modules
        cut = [False]
        _send(b"\x8a\x01", _str(b"\x0a", sys.executable, cut) +  # PyStart, field 17
              _str(b"\x12", "%d.%d.%d" % sys.version_info[:3], cut) +
              b"".join(_str(b"\x1a", m, cut) for m in mods) + (b"\x20\x01" if in_child else b""),
              cut[0], flush=True)
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


_importlib_file = None


def _begin(name):
    # <- __enter__ <- _find_and_load (frozen) <- the importing frame, or importlib's
    # import_module (skipped: its caller is the import site)
    global _importlib_file
    if _dead or name == "sitecustomize":  # (our own chaining to the original)
        return
    try:
        if _fork_seen:
            _forked()
            if _dead:
                return
        if _importlib_file is None:
            _importlib_file = getattr(_modules.get("importlib"), "__file__", None)
        t = _get_ident()
        _depth[t] = _depth.get(t, 0) + 1
        f = _getframe(2)
        while f is not None:
            co = f.f_code
            fn = co.co_filename
            if not (fn.startswith("<frozen importlib") or fn in _HOOK_FILES or fn == _importlib_file):
                break
            f = f.f_back
        # The flags extension modules are dlopened with (RTLD_GLOBAL after
        # sys.setdlopenflags): the loader's events do not carry them.
        if f is None:
            _queue.append((0, _native_id(), _monotonic_ns(), name, None, 0, None, _getdlopenflags()))
        else:
            _queue.append((0, _native_id(), _monotonic_ns(), name, fn, f.f_lineno, co.co_name,
                           _getdlopenflags()))
    except Exception:
        _die()


def _end(name, exc):
    if _dead or name == "sitecustomize":
        return
    t = _get_ident()
    depth = _depth.get(t, 1) - 1
    if depth > 0:
        _depth[t] = depth
    else:
        _depth.pop(t, None)
    if exc is None:
        try:
            if _fork_seen:
                _forked()
                if _dead:
                    return
            _queue.append((1, _native_id(), _monotonic_ns(), name))
            if depth <= 0 or len(_queue) >= _BATCH_EVENTS:
                _flush()
        except Exception:
            _die()
        if name == "ctypes":
            _patch_ctypes()
        return
    t = type(exc)
    text = t.__name__
    if t.__module__ == "builtins":  # never run the program's own __str__
        text = "%s: %s" % (text, exc)
    cut = [False]
    _send(b"\x9a\x01", _str(b"\x0a", name, cut) + b"\x10\x01" + _str(b"\x1a", text, cut), cut[0],
          flush=depth <= 0)  # PyImportEnd, field 19


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
    cut = [False]
    _send(b"\xa2\x01", _str(b"\x0a", name, cut) + _stack(init, ctypes_file, _MAX_FRAMES, cut) +
          _str(b"\x1a", via, cut) + mode, cut[0], flush=True)  # PyDlopen, field 20: sent before the dlopen


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
