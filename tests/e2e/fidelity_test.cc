// Fidelity against glibc itself: in the very same run, the objects ldscope records as
// loaded (requested name, namespace, base address, in order) must be exactly the link
// maps that LD_DEBUG=files reports glibc generating, process by process; and so must
// the unloads of dlclose and of failed dlopens ("destroying link map").
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "support/test_support.h"

namespace ldscope {
namespace {

struct GlibcView {
  std::vector<std::string> maps;      // "name [ns] base"
  std::vector<std::string> destroys;  // "name [ns]"
};

// Parses every LD_DEBUG_OUTPUT file of a run (a forked child writes into its
// parent's file, so lines are sorted by the pid that prefixes them). Namespaces that
// appear in a process before its first object of namespace 0 are the auditors' own
// and are left out, as ldscope leaves them out.
std::map<std::string, GlibcView> ParseLdDebug(const std::string& dir) {
  std::map<std::string, GlibcView> by_pid;
  std::map<std::string, std::set<std::string>> audit_ns;
  std::map<std::string, bool> seen_ns0;
  std::map<std::string, std::string> pending;
  static const std::regex gen(R"(^\s*(\d+):\s+file=(.+) \[(\d+)\];  generating link map$)");
  static const std::regex base(R"(^\s*(\d+):.*base: 0x([0-9a-f]+))");
  static const std::regex destroy(R"(^\s*(\d+):\s+file=(.+) \[(\d+)\];  destroying link map$)");
  DIR* d = opendir(dir.c_str());
  while (dirent* de = d ? readdir(d) : nullptr) {
    if (std::string(de->d_name).rfind("dbg.", 0) != 0) continue;
    std::ifstream f(dir + "/" + de->d_name);
    std::string line;
    while (std::getline(f, line)) {
      std::smatch m;
      if (std::regex_search(line, m, gen)) {
        const std::string pid = m[1], ns = m[3];
        if (ns == "0") seen_ns0[pid] = true;
        if (!seen_ns0[pid]) audit_ns[pid].insert(ns);
        pending[pid] = audit_ns[pid].count(ns) ? "" : fmt::format("{} [{}]", m[2].str(), ns);
      } else if (std::regex_search(line, m, base)) {
        const std::string pid = m[1];
        if (!pending[pid].empty())
          by_pid[pid].maps.push_back(
              fmt::format("{} {:x}", pending[pid], std::stoull(m[2].str(), nullptr, 16)));
        pending[pid].clear();
      } else if (std::regex_search(line, m, destroy)) {
        const std::string pid = m[1];
        if (!audit_ns[pid].count(m[3].str()))
          by_pid[pid].destroys.push_back(fmt::format("{} [{}]", m[2].str(), m[3].str()));
      }
    }
  }
  if (d) closedir(d);
  return by_pid;
}

GlibcView LdscopeView(const v1::ProcessTimeline& p) {
  GlibcView v;
  std::map<uint64_t, std::string> names;
  for (const auto& e : p.entries()) {
    if (e.has_load()) {
      const auto& l = e.load();
      if (l.reason() == v1::LOAD_EXECUTABLE || l.reason() == v1::LOAD_INTERPRETER ||
          l.reason() == v1::LOAD_VDSO)
        continue;
      v.maps.push_back(fmt::format("{} [{}] {:x}", l.requested_name(), l.object().lmid(), l.base()));
    } else if (e.has_unload() && !e.unload().at_exit()) {
      v.destroys.push_back(fmt::format("{} [{}]", e.unload().object().path(), e.unload().object().lmid()));
    } else if (e.has_failed_dlopen()) {
      for (const auto& o : e.failed_dlopen().rolled_back())
        v.destroys.push_back(fmt::format("{} [{}]", o.path(), o.lmid()));
    }
  }
  return v;
}

// Runs argv under ldscope with LD_DEBUG=files and compares every traced process.
void ExpectSameAsGlibc(const std::string& name, const std::vector<std::string>& argv,
                       size_t min_objects) {
  const auto dir = testing::ScratchDir(name);
  const auto trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  const auto r = testing::RunCmd(cmd, {"LD_DEBUG=files", "LD_DEBUG_OUTPUT=" + dir + "/dbg"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = testing::TimelineOf({trace});
  ASSERT_GE(t.processes_size(), 1);
  size_t compared = 0;
  auto glibc_by_pid = ParseLdDebug(dir);
  for (const auto& p : t.processes()) {
    ASSERT_TRUE(glibc_by_pid.count(std::to_string(p.pid()))) << "no LD_DEBUG output for pid " << p.pid();
    const GlibcView& glibc = glibc_by_pid[std::to_string(p.pid())];
    const GlibcView ours = LdscopeView(p);
    EXPECT_EQ(ours.maps, glibc.maps) << "pid " << p.pid() << " " << p.exe();
    EXPECT_EQ(ours.destroys, glibc.destroys) << "pid " << p.pid() << " " << p.exe();
    EXPECT_EQ(p.missing_seqs(), 0u);
    compared += ours.maps.size();
  }
  EXPECT_GE(compared, min_objects) << "the workload loads enough to be a real comparison";
}

TEST(Fidelity, CDriverDlopenDlmopenDlcloseFailure) {
  ExpectSameAsGlibc("fidelity_driver",
                    {DLPROBE, "open", FIXTURES "/lib/libfix_a.so", "open",
                     FIXTURES "/lib/libfix_bad.so", "mopen", FIXTURES "/lib/libfix_b.so", "lazy",
                     "libm.so.6", "close", "close", "fork", "open",
                     FIXTURES "/lib/threads/libfix_t1.so"},
                    6);
}

// The machine's real python3 importing extension modules, numpy among them.
TEST(Fidelity, RealPythonImports) {
  ExpectSameAsGlibc("fidelity_python",
                    {"/usr/bin/python3", "-c",
                     "import numpy, decimal, json, ssl, sqlite3, ctypes, hashlib, zlib, bz2, "
                     "lzma, socket, select, array, math, uuid, csv, xml.etree.ElementTree, "
                     "ctypes.util; ctypes.CDLL('libm.so.6')"},
                    20);
}

}  // namespace
}  // namespace ldscope
