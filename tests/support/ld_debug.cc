// See ld_debug.h.
#include "support/ld_debug.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "support/test_support.h"

namespace ldscope::testing {

// A forked child writes into its parent's file, so lines are sorted by the pid that
// prefixes them. ld.so run as a program (`ld.so PROGRAM`) maps PROGRAM itself, first
// of all: the first line of the process's own file, which ldscope reports as the
// executable, not as a load.
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
    const std::string file_pid = std::string(de->d_name).substr(4);
    std::ifstream f(dir + "/" + de->d_name);
    std::string line;
    bool first = true;
    while (std::getline(f, line)) {
      std::smatch m;
      const bool was_first = first;
      first = false;
      if (std::regex_search(line, m, gen) && was_first && m[1] == file_pid && m[3] == "0") {
        pending[file_pid].clear();  // the program ld.so was asked to run
      } else if (std::regex_search(line, m, gen)) {
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

v1::Timeline ExpectSameAsGlibc(const std::string& name, const std::vector<std::string>& argv,
                               size_t min_objects, const std::vector<std::string>& env) {
  const auto dir = ScratchDir(name);
  const auto trace = dir + "/t.ldscope";
  std::vector<std::string> cmd = {LDSCOPE_BIN, "run", "-q", "-o", trace, "--"};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  std::vector<std::string> set = {"LD_DEBUG=files", "LD_DEBUG_OUTPUT=" + dir + "/dbg"};
  set.insert(set.end(), env.begin(), env.end());
  const auto r = RunCmd(cmd, set);
  EXPECT_EQ(r.code, 0) << r.err;
  const auto t = TimelineOf({trace});
  EXPECT_GE(ExpectTimelineSameAsGlibc(t, dir), min_objects) << "the workload loads enough to be a real comparison";
  return t;
}

size_t ExpectTimelineSameAsGlibc(const v1::Timeline& t, const std::string& dir) {
  EXPECT_GE(t.processes_size(), 1);
  size_t compared = 0;
  auto glibc_by_pid = ParseLdDebug(dir);
  for (const auto& p : t.processes()) {
    const std::string pid = std::to_string(p.pid());
    EXPECT_TRUE(glibc_by_pid.count(pid)) << "no LD_DEBUG output for pid " << pid;
    GlibcView& glibc = glibc_by_pid[pid];
    // ld.so names an object opened by a relative name (an empty or relative search path
    // element) relatively; the trace, in the working directory of the process.
    for (auto& d : glibc.destroys)
      if (!d.empty() && d.front() != '/' && !p.cwd().empty()) d = p.cwd() + "/" + d;
    const GlibcView ours = LdscopeView(p);
    EXPECT_EQ(ours.maps, glibc.maps) << "pid " << pid << " " << p.exe();
    EXPECT_EQ(ours.destroys, glibc.destroys) << "pid " << pid << " " << p.exe();
    EXPECT_EQ(p.missing_seqs(), 0u);
    compared += ours.maps.size();
  }
  return compared;
}

}  // namespace ldscope::testing
