// File names, argv and environments are byte strings. Any
// bytes (invalid UTF-8, a multi-byte character cut at the 4096-byte limit, control
// characters) travel from the audit library through the collector and trace files to
// every output without losing an event, come out escaped (text::Unescape gives the
// bytes back), and never put a line into a CI log that the runner would execute.
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ldscope_proto/report.pb.h"
#include "model/timeline.h"
#include "store/trace_file.h"
#include "support/report_json.h"
#include "support/test_support.h"
#include "text/escape.h"

namespace ldscope {
namespace {

namespace fs = std::filesystem;
using testing::RunCmd;
using text::Escape;
using text::Unescape;

const std::vector<std::string> kNoLoaderEnv = {"LD_LIBRARY_PATH", "LD_PRELOAD", "LDSCOPE_SOCKET",
                                               "LDSCOPE_DIR"};

// No line of an output may be a workflow command (after the blanks the runner trims)
// other than ldscope's own annotations, and no raw ESC or CR may reach a terminal.
void ExpectNoInjection(const std::string& what, const std::string& out) {
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << what << ": raw ESC";
  EXPECT_EQ(out.find('\r'), std::string::npos) << what << ": raw CR";
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line.compare(i, 2, "::") != 0) continue;
    const bool ours = line.rfind("::error title=ldscope ", 0) == 0 ||
                      line.rfind("::warning title=ldscope ", 0) == 0 ||
                      line.rfind("::notice title=ldscope ", 0) == 0;
    EXPECT_TRUE(ours) << what << ": a line the runner would execute: " << line;
  }
}

void Copy(const std::string& from, const std::string& dir) {
  fs::create_directories(dir);
  fs::copy_file(from, dir + "/" + fs::path(from).filename().string());
}

v1::Timeline ParseTimeline(const std::string& json) {
  v1::Timeline t;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &t).ok()) << json.substr(0, 500);
  return t;
}

// The raw paths of a process's loads of one reason.
std::multiset<std::string> LoadedPaths(const v1::ProcessTimeline& p, v1::LoadReason reason) {
  std::multiset<std::string> out;
  for (const auto& e : p.entries())
    if (e.has_load() && e.load().reason() == reason) out.insert(Unescape(e.load().object().path()));
  return out;
}

// What a shell makes of the argv line `show` prints.
std::vector<std::string> ShellWords(const std::string& show_text) {
  const std::string key = "  argv: ";
  const size_t at = show_text.find(key);
  if (at == std::string::npos) return {};
  const std::string line = show_text.substr(at + key.size(), show_text.find('\n', at) - at - key.size());
  const auto r = RunCmd({"/bin/bash", "-c", "printf '%s\\0' " + line});
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> words;
  std::string w;
  for (char c : r.out) {
    if (c == '\0') {
      words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  return words;
}

std::vector<std::string> Raw(const google::protobuf::RepeatedPtrField<std::string>& escaped) {
  std::vector<std::string> out;
  for (const auto& s : escaped) out.push_back(Unescape(s));
  return out;
}

// Library directories named with 0xff, a newline followed by a workflow command, ESC
// and CR: the loads are recorded, every output shows them escaped, none injects.
TEST(Bytes, OddDirectoryNamesInEveryOutput) {
  const auto dir = testing::ScratchDir("bytes_odd");
  // The broken copy of libfix_a.so (its libfix_b.so is missing: a finding names it).
  const std::string broken = dir + "/bad\xff/c\n::error::injected";
  const std::string broken_lib = broken + "/libfix_a.so\n::error::injected\xff";
  const std::string good = dir + "/e\x1b[31mred\rcr";
  fs::create_directories(broken);
  fs::copy_file(FIXTURES "/lib/libfix_a.so", broken_lib);
  Copy(FIXTURES "/lib/libfix_a.so", good);
  Copy(FIXTURES "/lib/libfix_b.so", good);
  const std::string trace = dir + "/t.ldscope", summary = dir + "/summary.md";
  const std::vector<std::string> gha = {"GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary};
  const auto run = RunCmd({LDSCOPE_BIN, "run", "-o", trace, "--", DLPROBE, "open", broken_lib,
                           "open", good + "/libfix_a.so"},
                          gha, kNoLoaderEnv);
  ASSERT_EQ(run.code, 0) << run.err;
  ExpectNoInjection("run", run.err);  // (stdout is dlprobe's own)
  EXPECT_NE(run.err.find("::notice title=ldscope missing-library"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("dlopen of libfix_a.so\\n::error::injected\\xff failed: its NEEDED libfix_b.so is not found"),
            std::string::npos) << run.err;

  const auto t = testing::TimelineOf({trace});
  const auto procs = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(LoadedPaths(*procs[0], v1::LOAD_DLOPEN),
            (std::multiset<std::string>{broken_lib, good + "/libfix_a.so"}));
  EXPECT_EQ(LoadedPaths(*procs[0], v1::LOAD_NEEDED).count(good + "/libfix_b.so"), 1u);

  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(show.code, 0) << show.err;
  ExpectNoInjection("show", show.out + show.err);
  const auto json = RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace});
  ASSERT_EQ(json.code, 0) << json.err;
  ExpectNoInjection("show json", json.out + json.err);
  const auto jt = ParseTimeline(json.out);
  ASSERT_EQ(jt.processes_size(), 1);
  EXPECT_EQ(LoadedPaths(jt.processes(0), v1::LOAD_DLOPEN), LoadedPaths(*procs[0], v1::LOAD_DLOPEN));
  const auto diff = RunCmd({LDSCOPE_BIN, "diff", trace, trace});
  ExpectNoInjection("diff", diff.out + diff.err);
  const auto report = RunCmd({LDSCOPE_BIN, "report", trace});
  ExpectNoInjection("report", report.out + report.err);
  EXPECT_NE(report.out.find("dlopen of libfix_a.so\\n::error::injected\\xff failed: its NEEDED libfix_b.so is not found"),
            std::string::npos) << report.out;
  const auto gh = RunCmd({LDSCOPE_BIN, "report", "--github", trace}, {"GITHUB_STEP_SUMMARY=" + summary});
  ExpectNoInjection("report --github", gh.out + gh.err);
  const std::string md = testing::ReadFile(summary);
  ExpectNoInjection("step summary", md);
  EXPECT_NE(md.find("dlopen of libfix\\_a.so\\\\n::error::injected\\\\xff failed"), std::string::npos) << md;
  const auto chrome = RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", dir + "/c.json"});
  ASSERT_EQ(chrome.code, 0) << chrome.err;
  ExpectNoInjection("export", chrome.out + chrome.err + testing::ReadFile(dir + "/c.json"));

  // The whole text, against a golden file (ExpectGolden canonicalises the machine's
  // hwcaps candidates, the build tree and the run; the process's own values here).
  std::string text = show.out;
  const auto& p = *procs[0];
  text = testing::ReplaceAll(text, "process " + std::to_string(p.pid()) + ":", "process ${PID}:");
  text = testing::ReplaceAll(text, "parent pid " + std::to_string(p.ppid()), "parent pid ${PPID}");
  text = testing::ReplaceAll(text, "cwd " + p.cwd(), "cwd ${CWD}");
  text = testing::ReplaceAll(text, "glibc " + p.glibc_version(), "glibc ${GLIBC}");
  testing::ExpectGolden("show_odd_names.txt", text);
}

// An environment entry that is not UTF-8, argv with invalid UTF-8, quotes and an
// argument whose 4096-byte cut splits a multi-byte character: recorded, cut and flagged.
TEST(Bytes, ArgvAndEnvironment) {
  const auto dir = testing::ScratchDir("bytes_argv");
  const std::string trace = dir + "/t.ldscope";
  const std::string long_arg = std::string(4095, 'a') + "\xc3\xa9";
  const std::string long_path = "/" + std::string(4094, 'b') + "\xc3\xa9";  // dlopen: ENAMETOOLONG
  const std::vector<std::string> argv = {DLPROBE, "exit", "0", "\xff\xfe bad", "it's $x\\n", long_arg};
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  const auto run = RunCmd(cmd, {"X\xff=1", "LDSCOPE_TEST_VALUE=\x1b[2J\r\xff", "LD_BIND_NOT=\xe2\x82"},
                          kNoLoaderEnv);
  ASSERT_EQ(run.code, 0) << run.err;
  ExpectNoInjection("run", run.out + run.err);
  std::vector<std::string> recorded = argv;
  recorded.back() = long_arg.substr(0, 4096);  // "a"*4095 and the first byte of é

  const auto json = RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto t = ParseTimeline(json.out);
  ASSERT_EQ(t.processes_size(), 1) << json.out.substr(0, 2000);
  const auto& p = t.processes(0);
  EXPECT_EQ(Raw(p.argv()), recorded);
  EXPECT_TRUE(p.start_truncated());
  EXPECT_NE(json.out.find("\"startTruncated\": true"), std::string::npos);
  EXPECT_EQ(Unescape(p.env().at("LDSCOPE_TEST_VALUE")), "\x1b[2J\r\xff");
  EXPECT_EQ(Unescape(p.env().at("LD_BIND_NOT")), "\xe2\x82");
  EXPECT_GE(p.entries_size(), 4);
  EXPECT_EQ(p.missing_seqs(), 0u);

  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(show.code, 0) << show.err;
  ExpectNoInjection("show", show.out + show.err);
  EXPECT_EQ(ShellWords(show.out), recorded) << "the argv line pastes back into a shell";
  EXPECT_NE(show.out.find("  [truncated] the start event was cut to fit"), std::string::npos);

  // A dlopen of a name whose cut splits a character: the search is flagged.
  const std::string trace2 = dir + "/t2.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace2, "--", DLPROBE, "open", long_path}, {},
                   kNoLoaderEnv).code, 0);
  const auto t2 = testing::TimelineOf({trace2});
  ASSERT_EQ(t2.processes_size(), 1);
  int cut_searches = 0;
  for (const auto& e : t2.processes(0).entries())
    if (e.has_search() && Unescape(e.search().requested_name()) == long_path.substr(0, 4096)) {
      ++cut_searches;
      EXPECT_TRUE(e.truncated());
    }
  EXPECT_EQ(cut_searches, 1);
  const auto show2 = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace2});
  EXPECT_NE(show2.out.find(std::string(4094, 'b') + "\\xc3  requested by " DLPROBE "  [truncated]\n"),
            std::string::npos);
  const auto json2 = RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace2});
  EXPECT_NE(json2.out.find("\"truncated\": true"), std::string::npos);
}

// LDSCOPE_DIR traces (written by the audit library itself) with such bytes read back.
TEST(Bytes, LdscopeDirTracesReadBack) {
  const auto dir = testing::ScratchDir("bytes_dir");
  const std::string odd = dir + "/lib\xff\x1b\r\n::warning::x";
  Copy(FIXTURES "/lib/libfix_a.so", odd);
  Copy(FIXTURES "/lib/libfix_b.so", odd);
  fs::create_directories(dir + "/traces");
  const auto r = RunCmd({DLPROBE, "open", odd + "/libfix_a.so", "\xff"},
                        {"LD_AUDIT=" AUDIT_LIB, "LDSCOPE_DIR=" + dir + "/traces"}, kNoLoaderEnv);
  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", dir + "/traces"});
  EXPECT_EQ(show.code, 0) << show.err;
  ExpectNoInjection("show", show.out + show.err);
  const auto t = testing::TimelineOf({dir + "/traces"});
  ASSERT_EQ(t.processes_size(), 1);
  EXPECT_EQ(LoadedPaths(t.processes(0), v1::LOAD_DLOPEN),
            (std::multiset<std::string>{odd + "/libfix_a.so"}));
  EXPECT_EQ(LoadedPaths(t.processes(0), v1::LOAD_NEEDED).count(odd + "/libfix_b.so"), 1u);
  EXPECT_NE(show.out.find("lib\\xff\\e\\r\\n::warning::x/libfix_b.so (soname libfix_b.so)"),
            std::string::npos) << show.out;
}

// A trace whose byte fields were written as `string` (the same wire format) reads the
// same: the fuzz corpus keeps one such trace (interned.ldscope).
TEST(Bytes, TracesOfTheStringSchemaStillRead) {
  const auto set = store::LoadTraces({GOLDEN_DIR "/../fuzz/corpus/trace/interned.ldscope"});
  ASSERT_EQ(set.files.size(), 1u);
  EXPECT_TRUE(set.files[0].ok()) << set.files[0].problem->message;
  const auto t = model::BuildTimeline(set);
  ASSERT_GE(t.processes_size(), 1);
  size_t loads = 0;
  for (const auto& p : t.processes())
    for (const auto& e : p.entries())
      if (e.has_load()) {
        ++loads;
        EXPECT_EQ(Escape(Unescape(e.load().object().path())), e.load().object().path());
      }
  EXPECT_GT(loads, 0u);
}

// A SONAME that is not UTF-8, as read from memory by the audit library and from disk by
// the analysis: both sides escape it alike, so two copies are one library.
TEST(Bytes, OddSonameInMemoryAndOnDisk) {
  const auto dir = testing::ScratchDir("bytes_soname");
  std::string lib = testing::ReadFile(FIXTURES "/lib/libfix_b.so");
  const std::string soname = "libf\xff\n_b.so";  // as long as "libfix_b.so"
  const size_t at = lib.find(std::string("libfix_b.so") + '\0');
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(soname.size(), std::string("libfix_b.so").size());
  lib.replace(at, soname.size(), soname);
  const std::vector<std::string> files = {dir + "/one\xfe/libodd.so", dir + "/two\r/libodd.so"};
  for (const auto& f : files) {
    fs::create_directories(fs::path(f).parent_path());
    testing::WriteFile(f, lib);
  }
  const std::string trace = dir + "/t.ldscope";
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "open", files[0], "open",
                    files[1]}, {}, kNoLoaderEnv).code, 0);
  const auto rj = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace});
  v1::Report rep;
  ASSERT_TRUE(testing::ParseJson(rj.out, &rep)) << rj.out;
  ASSERT_EQ(rep.findings_size(), 1) << rj.out;
  const auto& f = rep.findings(0);
  EXPECT_EQ(f.kind(), v1::DUPLICATE_LIBRARY);
  std::vector<std::string> paths;
  for (const auto& o : f.objects()) {
    EXPECT_EQ(o.soname(), "libf\\xff\\n_b.so");
    paths.push_back(Unescape(o.path()));
  }
  EXPECT_EQ(paths, files);
  const auto report = RunCmd({LDSCOPE_BIN, "report", trace});
  ExpectNoInjection("report", report.out + report.err);
  EXPECT_EQ(report.err, "");
}

// A library loaded by a relative name from a working directory whose name is not
// UTF-8 (its ObjOpen carries that directory): the event is recorded and read back like
// any other, and the load names the file under that directory.
TEST(Bytes, RelativeLoadUnderANonUtf8WorkingDirectory) {
  const auto dir = testing::ScratchDir("bytes_cwd");
  const std::string cwd = dir + "/w\xff\x1b";
  Copy(FIXTURES "/lib/libfix_b.so", cwd);
  const std::string trace = dir + "/t.ldscope";
  const auto run = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", DLPROBE, "cd", cwd, "open", "./libfix_b.so"},
                          {}, kNoLoaderEnv);
  ASSERT_EQ(run.code, 0) << run.err;
  ExpectNoInjection("run", run.err);
  const store::TraceFile tf = store::ReadTraceFile(trace);
  EXPECT_TRUE(tf.ok()) << tf.problem->message << " at " << tf.problem->offset;
  const auto t = testing::TimelineOf({trace});
  const auto procs = testing::ByExe(t, "/dlprobe");
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(LoadedPaths(*procs[0], v1::LOAD_DLOPEN), (std::multiset<std::string>{cwd + "/libfix_b.so"}));
  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(show.code, 0) << show.err;
  ExpectNoInjection("show", show.out + show.err);
  EXPECT_NE(show.out.find(Escape(cwd + "/libfix_b.so")), std::string::npos) << show.out;
}

// A path of invalid UTF-8, control bytes and a backslash that reads as an escape: the
// traced program opens it, the facts are read from it and the analysis opens it by its
// bytes (no file it names is unreadable; once it is gone, the analysis says so, or
// answers from the facts), and every output names it escaped, never raw.
TEST(Bytes, OddPathOpenedByItsBytes) {
  const auto dir = testing::ScratchDir("bytes_real_path");
  const std::string odd_dir = "p\xff\x01\n\x1b\\x41";
  const std::string odd = dir + "/" + odd_dir;
  const std::vector<std::string> files = {odd + "/libfix_b.so", dir + "/plain/libfix_b.so"};
  for (const auto& f : files) Copy(FIXTURES "/lib/libfix_b.so", fs::path(f).parent_path().string());
  const std::string bare = dir + "/bare.ldscope", with_facts = dir + "/facts.ldscope";
  const std::vector<std::string> open = {DLPROBE, "open", files[0], "open", files[1]};
  std::vector<std::string> run = {LDSCOPE_BIN, "run", "-q", "--no-facts", "-o", bare, "--"};
  run.insert(run.end(), open.begin(), open.end());
  ASSERT_EQ(RunCmd(run, {}, kNoLoaderEnv).code, 0);
  run = {LDSCOPE_BIN, "run", "-q", "-o", with_facts, "--"};
  run.insert(run.end(), open.begin(), open.end());
  ASSERT_EQ(RunCmd(run, {}, kNoLoaderEnv).code, 0);

  // The facts record of the odd path was read from the file (its SONAME, its symbols).
  const store::TraceFile tf = store::ReadTraceFile(with_facts);
  ASSERT_TRUE(tf.ok());
  bool found = false;
  for (const auto& bytes : tf.facts) {
    v1::ObjectFacts f;
    ASSERT_TRUE(f.ParseFromString(bytes));
    if (std::find(f.paths().begin(), f.paths().end(), files[0]) == f.paths().end()) continue;
    found = true;
    EXPECT_EQ(f.unreadable(), "");
    EXPECT_EQ(f.soname(), "libfix_b.so");
    EXPECT_GT(f.symbols_size(), 0u);
  }
  EXPECT_TRUE(found) << "no facts record names " << Escape(files[0]);

  // Every output names the odd directory escaped: as text, and inside JSON and Markdown
  // (where the backslashes are escaped again).
  const std::string shown = Escape(odd_dir), quoted = testing::ReplaceAll(shown, "\\", "\\\\");
  ASSERT_EQ(shown, "p\\xff\\x01\\n\\e\\\\x41");
  const auto expect_named = [&](const std::string& what, const std::string& out, const std::string& as) {
    ExpectNoInjection(what, out);
    EXPECT_EQ(out.find(odd_dir), std::string::npos) << what << ": the raw bytes";
    EXPECT_EQ(out.find('\xff'), std::string::npos) << what << ": a raw 0xff";
    EXPECT_EQ(out.find('\x01'), std::string::npos) << what << ": a raw 0x01";
    EXPECT_NE(out.find(as), std::string::npos) << what << " does not name " << as << ":\n" << out;
  };
  for (const auto& trace : {bare, with_facts}) {
    const auto report = RunCmd({LDSCOPE_BIN, "report", trace});
    expect_named("report", report.out + report.err, shown);
    EXPECT_EQ((report.out + report.err).find("could not be read"), std::string::npos) << report.out;
    const auto rj = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace});
    expect_named("report json", rj.out + rj.err, quoted);
    v1::Report rep;
    ASSERT_TRUE(testing::ParseJson(rj.out, &rep)) << rj.out;
    ASSERT_EQ(rep.findings_size(), 1) << rj.out;
    EXPECT_EQ(rep.findings(0).kind(), v1::DUPLICATE_LIBRARY);
    std::vector<std::string> paths;
    for (const auto& o : rep.findings(0).objects()) paths.push_back(Unescape(o.path()));
    EXPECT_EQ(paths, files);
  }
  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", bare});
  expect_named("show", show.out + show.err, shown);
  const auto sj = RunCmd({LDSCOPE_BIN, "show", "--format", "json", bare});
  expect_named("show json", sj.out + sj.err, quoted);
  const auto jt = ParseTimeline(sj.out);
  ASSERT_EQ(jt.processes_size(), 1);
  EXPECT_EQ(LoadedPaths(jt.processes(0), v1::LOAD_DLOPEN), (std::multiset<std::string>{files[0], files[1]}));
  const std::string summary = dir + "/summary.md", junit = dir + "/junit.xml", chrome = dir + "/c.json",
                    otlp = dir + "/otlp";
  const auto gh =
      RunCmd({LDSCOPE_BIN, "report", "--github", "--junit", junit, bare}, {"GITHUB_STEP_SUMMARY=" + summary});
  expect_named("report --github", gh.out + gh.err, shown);
  expect_named("step summary", testing::ReadFile(summary), quoted);
  expect_named("junit", testing::ReadFile(junit), shown);
  ASSERT_EQ(RunCmd({LDSCOPE_BIN, "export", "--chrome", bare, "-o", chrome}).code, 0);
  expect_named("chrome", testing::ReadFile(chrome), quoted);
  const auto ot = RunCmd({LDSCOPE_BIN, "export", "--otlp", otlp, bare});
  ASSERT_EQ(ot.code, 0) << ot.err;
  expect_named("otlp traces", testing::ReadFile(otlp + "/traces.jsonl"), quoted);
  expect_named("otlp logs", testing::ReadFile(otlp + "/logs.jsonl"), quoted);

  // Once the odd directory is gone, the analysis cannot open its file (so it did open it
  // above) and says so, naming it escaped; with the facts it answers from them.
  fs::rename(odd, dir + "/gone");
  const auto gone = RunCmd({LDSCOPE_BIN, "report", bare});
  expect_named("report, file gone", gone.out + gone.err, shown);
  EXPECT_NE((gone.out + gone.err).find("1 object file could not be read"), std::string::npos) << gone.out;
  const auto from_facts = RunCmd({LDSCOPE_BIN, "report", with_facts});
  EXPECT_EQ((from_facts.out + from_facts.err).find("could not be read"), std::string::npos) << from_facts.out;
  EXPECT_NE(from_facts.out.find("duplicate-library"), std::string::npos) << from_facts.out;
}

// Random byte strings as directory names, argv and environment values.
std::string RandomBytes(std::mt19937& rng, bool slash) {
  static const std::vector<std::string> pieces = {
      "a", "\\", "\\x41", "\n", "\r", "\t", "\x1b", "\x7f", "\xff", "\xc3", "\xa9", "\xc3\xa9",
      "\xe2\x82\xac", "\xe2\x82", "\xf0\x9f\x98\x80", "\xf0\x9f", "\xed\xa0\x80", "\xc2\x85",
      "\xe2\x80\xae", "'", "\"", "$", "::", " ", "\x01", "%", "|", "*", "`", "/"};
  std::uniform_int_distribution<size_t> len(1, 12), pick(0, pieces.size()), byte(1, 255);
  std::string s;
  for (size_t i = len(rng); i > 0; --i) {
    const size_t p = pick(rng);
    std::string piece = p == pieces.size() ? std::string(1, static_cast<char>(byte(rng))) : pieces[p];
    if (!slash && piece == "/") piece = "_";
    s += piece;
  }
  return s;
}

// The property: random byte strings through the whole pipeline (audit library
// -> collector -> trace -> show, report, JSON, Chrome export) lose no event, and what
// the outputs print unescapes to the original bytes.
TEST(Bytes, RandomBytesThroughThePipeline) {
  const auto root = testing::ScratchDir("bytes_random");
  std::mt19937 rng(20261130);
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", root + "/t.ldscope", "--"};
  std::vector<std::string> argv = {DLPROBE};
  std::multiset<std::string> libs;
  for (int i = 0; i < 16; ++i) {
    const std::string d = root + "/" + std::to_string(i) + RandomBytes(rng, false);
    Copy(FIXTURES "/lib/libfix_b.so", d);
    libs.insert(d + "/libfix_b.so");
    argv.insert(argv.end(), {"open", d + "/libfix_b.so"});
  }
  argv.insert(argv.end(), {"exit", "0"});
  for (int i = 0; i < 16; ++i) argv.push_back(RandomBytes(rng, true));
  std::vector<std::string> env;
  std::map<std::string, std::string> values;
  for (int i = 0; i < 8; ++i) {
    const std::string name = "LDSCOPE_R" + std::to_string(i);
    values[name] = RandomBytes(rng, true);
    env.push_back(name + "=" + values[name]);
  }
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  const auto run = RunCmd(cmd, env, kNoLoaderEnv);
  ASSERT_EQ(run.code, 0) << run.err;
  ExpectNoInjection("run", run.err);  // (stdout is dlprobe's own)
  const std::string trace = root + "/t.ldscope";

  const auto json = RunCmd({LDSCOPE_BIN, "show", "--format", "json", trace});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto t = ParseTimeline(json.out);
  ASSERT_EQ(t.processes_size(), 1);
  const auto& p = t.processes(0);
  EXPECT_EQ(p.dropped() + p.missing_seqs(), 0u);
  EXPECT_TRUE(p.exited());
  EXPECT_EQ(LoadedPaths(p, v1::LOAD_DLOPEN), libs);
  EXPECT_EQ(Raw(p.argv()), argv);
  for (const auto& [name, value] : values) EXPECT_EQ(Unescape(p.env().at(name)), value) << name;

  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ASSERT_EQ(show.code, 0) << show.err;
  ExpectNoInjection("show", show.out + show.err);
  EXPECT_EQ(ShellWords(show.out), argv);
  for (const auto& lib : libs)
    EXPECT_NE(show.out.find("      mapped " + Escape(lib) + " (soname libfix_b.so)"), std::string::npos)
        << Escape(lib);

  const auto report = RunCmd({LDSCOPE_BIN, "report", trace});
  ExpectNoInjection("report", report.out + report.err);
  const auto rj = RunCmd({LDSCOPE_BIN, "report", "--format", "json", trace});
  ExpectNoInjection("report json", rj.out + rj.err);
  v1::Report rep;
  ASSERT_TRUE(testing::ParseJson(rj.out, &rep)) << rj.out;
  size_t objects = 0;
  for (const auto& f : rep.findings())
    for (const auto& o : f.objects()) {
      ++objects;
      EXPECT_TRUE(libs.count(Unescape(o.path())) == 1 || o.path().rfind("/lib", 0) == 0) << o.path();
    }
  EXPECT_GT(objects, 0u) << "16 copies of libfix_b.so are duplicates: " << rj.out;

  const auto chrome = RunCmd({LDSCOPE_BIN, "export", "--chrome", trace, "-o", root + "/c.json"});
  ASSERT_EQ(chrome.code, 0) << chrome.err;
  const auto paths = RunCmd({"/usr/bin/python3", "-c",
                             "import json, sys\n"
                             "d = json.load(open(sys.argv[1]))\n"
                             "for e in d['traceEvents'] if isinstance(d, dict) else d:\n"
                             "    if e.get('cat') == 'load' and 'libfix_b' in e['args']['path']:\n"
                             "        print(e['args']['path'])\n",
                             root + "/c.json"});
  ASSERT_EQ(paths.code, 0) << paths.err;
  std::multiset<std::string> exported;
  std::istringstream in(paths.out);
  for (std::string line; std::getline(in, line);) exported.insert(Unescape(line));
  EXPECT_EQ(exported, libs);
}

// The Python hook sends file names as the bytes they are: a module under a directory
// whose name is not UTF-8 is named exactly in the ctypes call site.
TEST(Bytes, PythonModuleUnderNonUtf8Directory) {
  const auto dir = testing::ScratchDir("bytes_python");
  const std::string pkg = dir + "/py\xff\x1b";
  fs::create_directories(pkg);
  testing::WriteFile(pkg + "/oddmod.py", "import ctypes\nctypes.CDLL('" FIXTURES "/lib/libfix_b.so')\n");
  const std::string trace = dir + "/t.ldscope";
  // The directory travels in a variable whose value is not recorded, so that only the
  // hook's own events carry it.
  const auto run = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--", "/usr/bin/python3", "-c",
                           "import os, sys\n"
                           "sys.path.insert(0, os.fsdecode(os.environb[b'ODD_DIR']))\n"
                           "import oddmod"},
                          {"ODD_DIR=" + pkg}, kNoLoaderEnv);
  ASSERT_EQ(run.code, 0) << run.err;
  const auto t = testing::TimelineOf({trace});
  const v1::Load* load = nullptr;
  for (const auto& p : t.processes())
    for (const auto& e : p.entries())
      if (e.has_load() && e.load().object().path() == FIXTURES "/lib/libfix_b.so") load = &e.load();
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(Unescape(load->python().call_site().file()), pkg + "/oddmod.py");
  EXPECT_EQ(load->python().call_site().line(), 2u);
  EXPECT_EQ(load->python().top_module(), "oddmod");
  const auto show = RunCmd({LDSCOPE_BIN, "show", "--no-timestamps", trace});
  ExpectNoInjection("show", show.out + show.err);
  EXPECT_NE(show.out.find("py\\xff\\e/oddmod.py:2"), std::string::npos) << show.out;
}

}  // namespace
}  // namespace ldscope
