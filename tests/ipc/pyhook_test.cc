// The Python hook's datagram format (ipc/pyhook.h): marshal data that the collector turns
// into the schema's events, exactly as if the hook had encoded them itself. The datagrams here are made by the
// machine's /usr/bin/python3 with marshal.dumps, as the hook makes them; the expected
// events by libprotobuf; the expected bytes of odd strings by Python's own encoder.
// Anything malformed is refused whole, and never crashes the collector.
#include <gtest/gtest.h>

#include <filesystem>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "ipc/pyhook.h"
#include "ipc/server.h"
#include "store/trace_file.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

std::string Unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// One line of hex per value the script prints (print(x.hex())).
std::vector<std::string> Python(const std::string& script, const std::string& python = "/usr/bin/python3") {
  const auto r = testing::RunCmd({python, "-c", script});
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> out;
  size_t start = 0;
  while (start < r.out.size()) {
    size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    out.push_back(Unhex(r.out.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

bool Decode(const std::string& d, std::vector<v1::Event>* events) {
  std::vector<std::string> owned;
  events->clear();
  if (!ipc::DecodePyHookDatagram(reinterpret_cast<const uint8_t*>(d.data()), d.size(), &owned))
    return false;
  for (const auto& s : owned) {
    v1::Event e;
    if (!ipc::ParseFrame(reinterpret_cast<const uint8_t*>(s.data()), s.size(), &e)) {
      ADD_FAILURE() << "a converted event does not parse";
      return false;
    }
    events->push_back(e);
  }
  return true;
}

// The events of every datagram the hook sent to lfd's one connection, in order; false
// (with a failure added) when it did not connect or a datagram does not decode.
bool ReceivedEvents(int lfd, std::vector<v1::Event>* events) {
  bool connected = false;
  const std::vector<std::string> datagrams = testing::ReceiveDatagrams(lfd, &connected);
  if (!connected) {
    ADD_FAILURE() << "the hook did not connect";
    return false;
  }
  events->clear();
  for (const std::string& d : datagrams) {
    std::vector<v1::Event> got;
    if (!Decode(d, &got)) {
      ADD_FAILURE() << "a datagram does not decode";
      return false;
    }
    events->insert(events->end(), got.begin(), got.end());
  }
  return true;
}

void ExpectSame(const v1::Event& got, const v1::Event& want) {
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(want, got)) << diff;
}

// Strings whose bytes the hook leaves to the collector: surrogate escapes, another lone
// surrogate (the whole string then backslash-escaped), non-ASCII, empty, long.
const char* kOddStrings =
    "odd = ['/a/b\\udcff.py', 'caf\\u00e9/\\U0001f600', '\\ud800weird\\udcff', 'x\\udc7fy', "
    "'', 'n' * 5000, '\\udcff' * 5000]\n";

TEST(PyHook, ConvertsEveryKindAsTheHookUsedToEncodeIt) {
  const auto out = Python(std::string("import marshal, os\n") + kOddStrings +
                          "name = ''.join(['pkg.', 'mod'])\n"  // one object, twice: a reference
                          "events = [\n"
                          " (2, 11, 1, '/usr/bin/python3', '3.11.2', ('_socket',), False),\n"
                          " (0, 11, 2**40, name, 0x102, odd[0], 12, '<module>'),\n"
                          " (0, 11, 2**40 + 1, 'top', 2),\n"
                          " (1, 11, 2**40 + 2, name),\n"
                          " (1, 12, 5, 'bad', \"ModuleNotFoundError: No module named 'bad'\"),\n"
                          " (3, 11, 9, b'libm.so.6', 'ctypes.CDLL', 256, (('f.py', 3, 'g'), ('h.py', None, 'k'))),\n"
                          " (3, 11, 10, 'libx.so', 'my.Loader', None, ()),\n"
                          " (2, 13, 11, '', '3.8.0', (), True),\n"
                          "] + [(0, 11, 100 + i, s, 0) for i, s in enumerate(odd)]\n"
                          "print((b'\\x00\\x01' + marshal.dumps((4242, 7, 3, events), 4)).hex())\n"
                          "for s in odd:\n"
                          "  try: b = s.encode('utf-8', 'surrogateescape')\n"
                          "  except UnicodeError: b = s.encode('utf-8', 'backslashreplace')\n"
                          "  print(b[:4096].hex())\n");
  ASSERT_EQ(out.size(), 8u);
  std::vector<v1::Event> got;
  ASSERT_TRUE(Decode(out[0], &got));
  ASSERT_EQ(got.size(), 8u + 7u);

  std::vector<v1::Event> want(8);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i].set_pid(4242);
    want[i].set_seq(7 + i);
    want[i].set_dropped(3);
    want[i].set_tid(11);
  }
  want[0].set_mono_ns(1);
  auto* start = want[0].mutable_py_start();
  start->set_executable("/usr/bin/python3");
  start->set_version("3.11.2");
  start->add_hook_modules("_socket");
  want[1].set_mono_ns(uint64_t{1} << 40);
  auto* begin = want[1].mutable_py_import();
  begin->set_module("pkg.mod");
  begin->set_dlopen_flags(0x102);
  auto* frame = begin->add_stack();
  frame->set_file("/a/b\xff.py");
  frame->set_line(12);
  frame->set_function("<module>");
  want[2].set_mono_ns((uint64_t{1} << 40) + 1);
  want[2].mutable_py_import()->set_module("top");
  want[2].mutable_py_import()->set_dlopen_flags(2);
  want[3].set_mono_ns((uint64_t{1} << 40) + 2);
  want[3].mutable_py_import_end()->set_module("pkg.mod");
  want[4].set_tid(12);
  want[4].set_mono_ns(5);
  want[4].mutable_py_import_end()->set_module("bad");
  want[4].mutable_py_import_end()->set_failed(true);
  want[4].mutable_py_import_end()->set_error("ModuleNotFoundError: No module named 'bad'");
  want[5].set_mono_ns(9);
  auto* dl = want[5].mutable_py_dlopen();
  dl->set_name("libm.so.6");
  dl->set_via("ctypes.CDLL");
  dl->set_mode(256);
  frame = dl->add_stack();
  frame->set_file("f.py");
  frame->set_line(3);
  frame->set_function("g");
  frame = dl->add_stack();
  frame->set_file("h.py");
  frame->set_function("k");
  want[6].set_mono_ns(10);
  want[6].mutable_py_dlopen()->set_name("libx.so");
  want[6].mutable_py_dlopen()->set_via("my.Loader");
  want[7].set_tid(13);
  want[7].set_mono_ns(11);
  want[7].mutable_py_start()->set_version("3.8.0");
  want[7].mutable_py_start()->set_forked(true);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSame(got[i], want[i]);
  }
  // The odd strings: the bytes Python's encoder gives (the hook's rule), cut at 4,096
  // bytes, the event then flagged truncated.
  for (size_t i = 0; i < 7; ++i) {
    SCOPED_TRACE(i);
    const v1::Event& e = got[8 + i];
    EXPECT_EQ(e.seq(), 15 + i);
    EXPECT_EQ(e.py_import().module(), out[1 + i]);
    EXPECT_EQ(e.truncated(), i >= 5) << "a string over 4,096 bytes";
  }
  EXPECT_EQ(got[8 + 2].py_import().module(), "\\ud800weird\\udcff");
  EXPECT_EQ(got[8 + 6].py_import().module(), std::string(4096, '\xff'));
}

TEST(PyHook, MalformedDatagramsAreRefusedWhole) {
  // Valid marshal data that breaks the format, each on a line of its own.
  const auto bad = Python(
      "import marshal\n"
      "def d(x): print((b'\\x00\\x01' + marshal.dumps(x, 4)).hex())\n"
      "ok = (0, 11, 5, 'm', 0)\n"
      "d((1, 0, 0, [ok]))\n"                       // 0: fine (the control)
      "d((0, 0, 0, [ok]))\n"                       // pid 0
      "d((2**32, 0, 0, [ok]))\n"                   // pid past 32 bits
      "d((1, 0, 0, []))\n"                         // no event
      "d((1, 0, 0, [ok], 5))\n"                    // a header of 5
      "d((1, -1, 0, [ok]))\n"                      // a negative number
      "d((1, 2**64, 0, [ok]))\n"                   // past 64 bits
      "d((1, 0, 0, [(4, 11, 5, 'm', 0)]))\n"       // no such kind
      "d((1, 0, 0, [(0, 11, 5, 'm')]))\n"          // a begin of 4
      "d((1, 0, 0, [(0, 11, 5, 'm', 0, 'f', 1)]))\n"  // a begin of 7
      "d((1, 0, 0, [(0, 2**32, 5, 'm', 0)]))\n"    // tid past 32 bits
      "d((1, 0, 0, [(0, 11, 5, 'm', 2**32)]))\n"   // flags past 32 bits
      "d((1, 0, 0, [(0, 11, 5, 3, 0)]))\n"         // a number for a string
      "d((1, 0, 0, [(0, 11, 5, 'm', 0, 'f', 'x', 'g')]))\n"  // a string for a line
      "d((1, 0, 0, [(0, 11, 5.0, 'm', 0)]))\n"     // a float
      "d((1, 0, 0, [(2, 11, 5, 'e', b'\\xff', (), False)]))\n"  // version not UTF-8
      "d((1, 0, 0, [(2, 11, 5, 'e', 'v', (), 1)]))\n"  // forked not a bool
      "d((1, 0, 0, [(3, 11, 5, 'n', 'v', None, (('f', 1),))]))\n"  // a frame of 2
      "d((1, 0, 0, [(3, 11, 5, 'n', 'v', 2**33, ())]))\n"  // mode past 32 bits
      "d((1, 0, 0, [ok, ok, 7]))\n"                // one bad event spoils the datagram
      "d((1, 0, 0, [(0, 11, 5, 'm', 0, ((((('deep',),),),),), 1, 'f')]))\n"
      "s = 'x' * 4096\n"
      "d((1, 0, 0, [(1, 11, 5, s)] * 2000))\n");   // 41 KiB that would be 8 MiB of events
  ASSERT_EQ(bad.size(), 22u);
  std::vector<v1::Event> events;
  EXPECT_TRUE(Decode(bad[0], &events));
  EXPECT_EQ(events.size(), 1u);
  for (size_t i = 1; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(bad[i].size(), ipc::kMaxDatagram);
    EXPECT_FALSE(Decode(bad[i], &events));
    EXPECT_TRUE(events.empty());
  }
  // Broken marshal data, by hand: the control, then each break.
  const std::string head("\x00\x01", 2);
  const std::string ok = bad[0];
  // clang-format off
  const std::string by_hand[] = {
      head,                                                      // nothing
      std::string("\x00\x02", 2) + ok.substr(2),                 // another format
      ok + "N",                                                  // trailing bytes
      head + std::string("(\xff\xff\xff\x7f", 5),                // a count far past the end
      head + std::string("(\x04\x00\x00\x00i\x01\x00\x00\x00r\x00\x00\x00\x00", 14),  // a reference to nothing
      head + std::string("\xa8\x04\x00\x00\x00r\x00\x00\x00\x00", 10),  // a tuple holding itself
      head + [] { std::string t; for (int i = 0; i < 200; ++i) t += std::string(")\x01", 2); return t + "N"; }(),  // nested too deep
      head + std::string("l\x06\x00\x00\x00", 5) + std::string(12, '\x01'),  // a long of 90 bits
      head + std::string("l\x01\x00\x00\x00\xff\xff", 7),        // a digit past 15 bits
      head + std::string("u\x10\x00\x00\x00\x61\x62", 7),        // a string past the end ("ab")
      head + std::string("g", 1) + std::string(8, '\0'),         // a float
      head + std::string("c", 1) + std::string(40, '\0'),        // a code object
  };
  // clang-format on
  for (const auto& d : by_hand) {
    SCOPED_TRACE(testing::ReplaceAll(d, std::string(1, '\0'), "\\0"));
    EXPECT_FALSE(Decode(d, &events));
  }
  // Every prefix of a good datagram is refused; no change of a byte crashes it.
  for (size_t n = 0; n < ok.size(); ++n) EXPECT_FALSE(Decode(ok.substr(0, n), &events)) << n;
  for (size_t i = 0; i < ok.size(); ++i)
    for (int v = 0; v < 256; v += 7) {
      std::string d = ok;
      d[i] = static_cast<char>(v);
      Decode(d, &events);
    }
}

// Through a real socket: the hook's datagrams are stored as the events they stand for,
// on the connection's stream; a malformed one disconnects its sender, its earlier
// events kept.
TEST(PyHook, ServerStoresTheHooksEventsAndDropsABadSender) {
  const auto d = Python(
      "import marshal\n"
      "def d(x): print((b'\\x00\\x01' + marshal.dumps(x, 4)).hex())\n"
      "d((50, 0, 0, [(2, 50, 1, '/usr/bin/python3', '3.11.2', (), False), (0, 50, 2, 'json', 2, '<string>', 1, '<module>')]))\n"
      "d((50, 2, 0, [(1, 50, 3, 'json')]))\n"
      "d((51, 0, 0, [(2, 51, 1, '/usr/bin/python3', '3.11.2', (), False)]))\n"
      "d((51, 1, 0, [(0, 51, 2, 'json', 2), (0, 51, 3, 'json', 'not a number')]))\n");
  ASSERT_EQ(d.size(), 4u);
  const auto dir = testing::ScratchDir("pyhook_server");
  const std::string trace = dir + "/t.ldscope";
  const ipc::ServerStats stats = testing::ServeGoodAndBad(dir, {d[0], d[1]}, {d[2], d[3]});
  EXPECT_EQ(stats.bad_clients, 1u);
  EXPECT_EQ(stats.events, 3u + 1u) << "good: 3; bad: its start";
  const auto t = store::ReadTraceFile(trace);
  ASSERT_TRUE(t.ok()) << t.problem->message;
  std::vector<std::string> seen;
  for (const auto& e : t.events) {
    if (e.pid() != 50) continue;
    EXPECT_EQ(e.stream(), 1u);
    const std::string at = std::to_string(e.seq()) + " ";
    if (e.has_py_import()) seen.push_back(at + "begin " + e.py_import().module() + " at " + e.py_import().stack(0).file());
    if (e.has_py_import_end()) seen.push_back(at + "end " + e.py_import_end().module());
    if (e.has_py_start()) seen.push_back(at + "start " + e.py_start().executable());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"0 start /usr/bin/python3", "1 begin json at <string>",
                                            "2 end json"}));
}


// Lines the collector finds from the line tables `python` sends, against its co_lines(); false
// when `python` is not a 3.11 or 3.12 (no line tables sent).
void CheckLines(const std::string& python, bool* checked_any) {
  const auto out = Python(
      "import marshal, sys, types, argparse, typing, ast, inspect\n"
      "if sys.version_info[:2] not in ((3, 11), (3, 12)): sys.exit(0)\n"
      "def codes(c):\n"
      "  yield c\n"
      "  for k in c.co_consts:\n"
      "    if isinstance(k, types.CodeType): yield from codes(k)\n"
      "events, want = [], []\n"
      "def line(co, off):\n"
      "  if off < 0: return co.co_firstlineno\n"
      "  for s, e, l in co.co_lines():\n"
      "    if s <= off < e: return l or 0\n"
      "  return 0\n"
      "def flush():\n"
      "  print((b'\\x00\\x01' + marshal.dumps((1, 0, 0, events), 4)).hex())\n"
      "  print(','.join(map(str, want)).encode().hex())\n"
      "  events.clear(); want.clear()\n"
      "for m in (argparse, typing, ast, inspect):\n"
      "  top = compile(open(m.__file__, encoding='utf-8').read(), m.__file__, 'exec')\n"
      "  for co in codes(top):\n"
      "    n = len(co.co_code)\n"
      "    step = max(2, (n // 300) * 2)\n"
      "    for off in list(range(-2, n + 8, step)) + [n - 2, 1 << 30]:\n"
      "      events.append((4, 1, 1, 'm', 0, 'f', co.co_name, co.co_linetable, co.co_firstlineno, off))\n"
      "      want.append(line(co, off))\n"
      "    if len(events) > 1500: flush()\n"
      "if events: flush()\n", python);
  if (out.empty()) return;  // not 3.11 or 3.12
  ASSERT_EQ(out.size() % 2, 0u);
  size_t checked = 0;
  for (size_t d = 0; d < out.size(); d += 2) {
    std::vector<v1::Event> got;
    ASSERT_TRUE(Decode(out[d], &got)) << "datagram " << d / 2;
    std::vector<std::string> want;
    std::string w = out[d + 1];
    for (size_t start = 0; start <= w.size();) {
      size_t end = w.find(',', start);
      if (end == std::string::npos) end = w.size();
      want.push_back(w.substr(start, end - start));
      start = end + 1;
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i, ++checked) {
      ASSERT_EQ(got[i].py_import().stack_size(), 1);
      ASSERT_EQ(std::to_string(got[i].py_import().stack(0).line()), want[i])
          << "datagram " << d / 2 << " event " << i << " (" << got[i].py_import().stack(0).function() << ")";
    }
  }
  EXPECT_GT(checked, 10000u);
  *checked_any = true;
}

// The line of an import statement, found by the collector in the code's line table
// (events of kind 4) exactly where CPython's f_lineno finds it: every code object of a
// few large standard modules, at offsets from before the first instruction to past the
// last, against what co_lines() says (the interpreter's own reading of the table).
TEST(PyHook, LinesAreFoundAsCPythonFindsThem) {
  bool any = false;
  // /usr/bin/python3 and pyenv's CPython 3.11 and 3.12 where installed: the two line-table
  // formats the collector reads (3.11's and 3.12's differ in their opcodes' caches).
  for (const std::string& python : testing::Pythons(11, 12)) {
    SCOPED_TRACE(python);
    CheckLines(python, &any);
  }
  if (!any) GTEST_SKIP() << "no CPython 3.11 or 3.12 here";
}

// The hook itself, against a socket of ours, where marshal is not enough: a module name
// that is a str subclass (marshal refuses it), a name too long for a datagram, and a
// file-system encoding other than UTF-8 (the hook then encodes every string itself).
// The events are the same in each case, cut where they always were.
TEST(PyHook, HookSendsWhatMarshalRefusesAndWhatIsTooLong) {
  const auto Ours = [](const std::string& m) {
    return m == "colorsys" || m == "fractions" || m.rfind("aaaa", 0) == 0;
  };
  for (const bool ascii : {false, true}) {
    SCOPED_TRACE(ascii ? "ascii file-system encoding" : "utf-8");
    const std::string dir = testing::ScratchDir(ascii ? "pyhook_ascii" : "pyhook_utf8");
    const std::string sock = dir + "/s";
    const int lfd = testing::ListenSeqpacket(sock);
    std::vector<std::string> env = {"PYTHONPATH=" PYTHON_HOOK_DIR, "LDSCOPE_SOCKET=" + sock};
    if (ascii) env.insert(env.end(), {"LC_ALL=C", "PYTHONUTF8=0", "PYTHONCOERCECLOCALE=0"});
    const auto r = testing::RunCmd({"/usr/bin/python3", "-c",
                                    "import sys\n"
                                    "class S(str): pass\n"
                                    "__import__(S('colorsys'))\n"
                                    "try:\n"
                                    "  __import__('a' * 70000)\n"
                                    "except ImportError:\n"
                                    "  pass\n"
                                    "import fractions\n"
                                    "print(sys.getfilesystemencoding())\n"},
                                   env, {"PYTHONSAFEPATH", "PYTHONNOUSERSITE"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, ascii ? "ascii\n" : "utf-8\n");
    std::vector<v1::Event> events;
    ASSERT_TRUE(ReceivedEvents(lfd, &events));
    std::vector<std::string> seen;
    for (size_t i = 0; i < events.size(); ++i) {
      const v1::Event& e = events[i];
      EXPECT_EQ(e.seq(), i);
      EXPECT_EQ(e.dropped(), 0u);
      std::string what = e.truncated() ? "(cut) " : "";
      if (e.has_py_import()) {
        const auto& b = e.py_import();
        if (!Ours(b.module())) continue;
        what += "begin " + b.module().substr(0, 8) + " " + std::to_string(b.module().size());
        if (b.stack_size() > 0)
          what += " at " + b.stack(0).file() + ":" + std::to_string(b.stack(0).line()) + " " + b.stack(0).function();
      } else if (e.has_py_import_end()) {
        const auto& b = e.py_import_end();
        if (!Ours(b.module())) continue;
        what += "end " + b.module().substr(0, 8) + " " + std::to_string(b.module().size());
        if (b.failed()) what += " failed: " + b.error().substr(0, 36) + " " + std::to_string(b.error().size());
      } else {
        continue;
      }
      seen.push_back(what);
    }
    EXPECT_EQ(seen, (std::vector<std::string>{
                        "begin colorsys 8 at <string>:3 <module>",
                        "end colorsys 8",
                        "(cut) begin aaaaaaaa 4096 at <string>:5 <module>",
                        "(cut) end aaaaaaaa 4096 failed: ModuleNotFoundError: No module named 4096",
                        "begin fraction 9 at <string>:8 <module>",
                        "end fraction 9",
                    }));
  }
}


// The hook's shortcuts change nothing it reports: importlib's lock-manager methods done
// in place (when they are the expected code) and the line found by the collector from
// the line table, against the hook loaded the same way but with both off (a base class
// whose methods are other code; f_lineno read at each import).
TEST(PyHook, ShortcutsReportWhatTheLongWayDoes) {
  const std::string script =
      "import os, sys, _frozen_importlib as b\n"
      "if sys.argv[1] == 'long':\n"
      "  class M(b._ModuleLockManager):\n"
      "    def __enter__(self):\n"
      "      return super().__enter__()\n"
      "    def __exit__(self, *a):\n"
      "      return super().__exit__(*a)\n"
      "  b._ModuleLockManager = M\n"
      "hook = os.environ['HOOK'] + '/_ldscope_hook.py'\n"
      "ns = {'__name__': '_ldscope_hook', '__file__': hook}\n"
      "exec(compile(open(hook).read(), hook, 'exec'), ns)\n"
      "if sys.argv[1] == 'long':\n"
      "  ns['_RAW_LINES'] = False\n"
      "ns['install'](os.environ['LDSCOPE_SOCKET'], ())\n"
      "import colorsys\n"
      "from email import message\n"
      "import importlib\n"
      "importlib.import_module('xml.dom.minidom')\n"
      "from concurrent.futures import thread\n"
      "try:\n"
      "  import no_such_module_zz\n"
      "except ImportError:\n"
      "  pass\n"
      "import _thread, time\n"  // an import with no Python frame at all below it
      "_thread.start_new_thread(__import__, ('wave',))\n"
      "while 'wave' not in sys.modules or getattr(sys.modules['wave'], '__spec__', None) is None "
      "or sys.modules['wave'].__spec__._initializing:\n"
      "  time.sleep(0.01)\n"
      "time.sleep(0.2)\n";
  std::vector<std::vector<std::string>> runs;
  for (const std::string mode : {"short", "long"}) {
    SCOPED_TRACE(mode);
    const std::string dir = testing::ScratchDir("pyhook_" + mode);
    const std::string sock = dir + "/s";
    const int lfd = testing::ListenSeqpacket(sock);
    const auto r = testing::RunCmd({"/usr/bin/python3", "-c", script, mode},
                                   {"HOOK=" PYTHON_HOOK_DIR, "LDSCOPE_SOCKET=" + sock},
                                   {"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONNOUSERSITE"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<v1::Event> events;
    ASSERT_TRUE(ReceivedEvents(lfd, &events));
    std::vector<std::string> seen;
    for (const auto& e : events) {
      if (e.has_py_import()) {
        const auto& b = e.py_import();
        std::string line = "begin " + b.module();
        for (const auto& f : b.stack())
          line += " at " + f.file() + ":" + std::to_string(f.line()) + " " + f.function();
        seen.push_back(line);
      } else if (e.has_py_import_end()) {
        seen.push_back("end " + e.py_import_end().module() + (e.py_import_end().failed() ? " failed" : ""));
      }
    }
    runs.push_back(seen);
  }
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], runs[1]);
  auto has = [&](const std::string& want) {
    return std::find(runs[0].begin(), runs[0].end(), want) != runs[0].end();
  };
  EXPECT_TRUE(has("begin colorsys at <string>:15 <module>"));
  EXPECT_TRUE(has("begin email.message at <string>:16 <module>"));
  EXPECT_TRUE(has("begin xml.dom.minidom at <string>:18 <module>"));
  EXPECT_TRUE(has("begin concurrent.futures.thread at <string>:19 <module>"));
  EXPECT_TRUE(has("begin no_such_module_zz at <string>:21 <module>"));
  EXPECT_TRUE(has("end no_such_module_zz failed"));
  EXPECT_TRUE(has("begin wave")) << "an import made from C: no frame";
  EXPECT_TRUE(has("end wave"));
  EXPECT_GT(runs[0].size(), 40u);
}

}  // namespace
}  // namespace ldscope
