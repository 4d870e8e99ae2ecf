// The Python hook's datagrams (python/_ldscope_hook.py), and their conversion into the
// protobuf events of proto/events.proto that the trace holds.
//
// The hook does as little as it can per import (bench/python-hook measures it): it
// queues tuples of raw facts and sends them as one marshal.dumps(x, 4) per datagram (a
// single C call in the interpreter); the collector does the encoding. The format is
// internal to ldscope (the hook and the collector of one build); the trace's events are
// exactly those of the schema, as if the hook had encoded them itself. A datagram is
//
//   0x00 0x01, then marshal version 4 of  (pid, first_seq, dropped, [event, ...])
//
// with each event a tuple (tid, mono_ns and the sequence number first_seq + index go
// into the Event's head; dropped into every event's `dropped`):
//   (0, tid, mono_ns, module, dlopen_flags)                          PyImportBegin
//   (0, tid, mono_ns, module, dlopen_flags, file, line, function)    ... with stack[0]
//   (4, tid, mono_ns, module, dlopen_flags, file, function, line_table, first_line,
//    offset)   ... with stack[0], its line found here: CPython 3.11/3.12's
//              PyCode_Addr2Line over the code's co_linetable (bytes), co_firstlineno
//              and the frame's f_lasti (may be negative); no line gives 0, as a
//              frame whose f_lineno is None did
//   (1, tid, mono_ns, module)                                        PyImportEnd
//   (1, tid, mono_ns, module, error)                                 ... failed
//   (2, tid, mono_ns, executable, version, (hook_module, ...), forked)          PyStart
//   (3, tid, mono_ns, name, via, mode or None, ((file, line, function), ...))   PyDlopen
// Integers are marshal's int or long (non-negative but for first_line and offset, 64
// bits at most; tid, line, flags and mode 32), a line may be None (0). A string field
// is a str or bytes: bytes are taken as they are; a str is what marshal writes (UTF-8,
// lone surrogates encoded as if they were characters) and becomes the bytes os.fsencode
// gives under UTF-8 (surrogate escapes U+DC80..U+DCFF back to the bytes 0x80..0xFF; a
// string with any other lone surrogate gets "\udXXX" for each, as Python's
// "backslashreplace"). A string longer than 4,096 bytes is cut there and its event
// flagged truncated. Only the marshal types above are taken (tuples, lists, ints,
// longs, None, True, False, str, bytes, references to objects already read), nested no
// deeper than the format needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ldscope::ipc {

// Whether a datagram is in the Python hook's format (its first bytes): no protobuf
// Event or EventBatch can start with a zero byte.
bool IsPyHookDatagram(const uint8_t* data, size_t size);

// Converts one such datagram into whole serialized Events, appended to out (cleared
// first). False, with out cleared, when it breaks the format in any way, or when it
// holds no event or would convert into more than a bounded number of bytes.
bool DecodePyHookDatagram(const uint8_t* data, size_t size, std::vector<std::string>* out);

}  // namespace ldscope::ipc
