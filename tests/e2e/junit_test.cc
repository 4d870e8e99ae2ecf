// JUnit XML (`run --junit`, `report --junit`) for CI systems other than GitHub Actions:
// a traced process tree compared whole with a golden file, and read back by a real
// consumer (Debian's python3-junitparser) with the expected counts and properties.
#include <gtest/gtest.h>

#include <regex>

#include "render/render.h"
#include "support/canonical.h"
#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::vector<std::string> kRankVars = {"RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                                            "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"};

std::string Normalize(std::string s) {
  s = std::regex_replace(s, std::regex("pid [0-9]+"), "pid N");
  s = std::regex_replace(s, std::regex("name=\"(pid|ppid)\" value=\"[0-9]+\""), "name=\"$1\" value=\"N\"");
  s = std::regex_replace(s, std::regex("time=\"[0-9.]+\""), "time=\"T\"");
  return s;
}


// junitparser's reading: counts as the file states them and as junitparser recounts
// them from the test cases, then each case's result, properties and output.
const char kReadBack[] = R"py(
import re, sys
from junitparser import JUnitXml
xml = JUnitXml.fromfile(sys.argv[1])
stated = [(xml.tests, xml.failures, xml.errors)] + [(s.tests, s.failures, s.errors) for s in xml]
xml.update_statistics()
recounted = [(xml.tests, xml.failures, xml.errors)] + [(s.tests, s.failures, s.errors) for s in xml]
print("counts as stated:", "yes" if stated == recounted else "no: %s vs %s" % (stated, recounted))
print("tests %d failures %d errors %d" % recounted[0])
for s in xml:
    print("suite %s: tests %d failures %d errors %d" % (s.name, s.tests, s.failures, s.errors))
    for c in s:
        props = " ".join("%s=%s" % (p.get("name"), re.sub("^[0-9]+$", "N", p.get("value")))
                         for p in c._elem.iter("property"))
        results = " ".join("%s(%s)" % (type(r).__name__, r.type) for r in c.result) or "passed"
        print("  %s | %s | %s%s" % (c.classname, results, props,
                                   " | system-out" if c.system_out else ""))
)py";

std::string ReadBack(const std::string& dir, const std::string& xml) {
  testing::WriteFile(dir + "/read_back.py", kReadBack);
  const auto r = RunCmd({"/usr/bin/python3", dir + "/read_back.py", xml});
  EXPECT_EQ(r.code, 0) << r.err;
  return r.out;
}

// A shell running three programs: a failing import order (an error), a working one
// with two NCCLs (a warning), and a program whose arguments need XML escaping.
TEST(Junit, ProcessTreeGoldenAndJunitparser) {
  const auto dir = testing::ScratchDir("junit_tree");
  const std::string trace = dir + "/t.ldscope";
  const std::string script =
      std::string("RANK=1 LOCAL_RANK=0 /usr/bin/python3 ") + SCENARIOS_DIR + "/cupy_then_torch.py " +
      FIXTURES + "; /usr/bin/python3 " + SCENARIOS_DIR + "/torch_then_cupy.py " + FIXTURES +
      "; /bin/true '<a&b>' \"q\\\"$(printf '\\001')\"";
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "-o", trace, "--junit", dir + "/run.xml", "--",
                         "/bin/sh", "-c", script},
                        {}, kRankVars);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string xml = testing::ReadFile(dir + "/run.xml");
  testing::ExpectGolden("junit_process_tree.xml", Normalize(xml));
  EXPECT_NE(xml.find("'&lt;a&amp;b&gt;' &quot;q\\\\&quot;$(printf '\\\\001')&quot;\" classname"), std::string::npos)
      << "the shell's own argument, escaped";
  EXPECT_NE(xml.find("/bin/true &lt;a&amp;b&gt; q&quot;\\x01\" classname"), std::string::npos)
      << "true's arguments: the control character as \\x01";
  EXPECT_EQ(testing::Canonicalise(ReadBack(dir, dir + "/run.xml")),
            "counts as stated: yes\n"
            "tests 4 failures 1 errors 0\n"
            "suite ${SHELL}: tests 1 failures 0 errors 0\n"
            "  ldscope.${SHELL} | passed | pid=N ppid=N trace=${SCRATCH}/t.ldscope\n"
            "suite /usr/bin/python3.X: tests 2 failures 1 errors 0\n"
            "  ldscope.python3_X | Failure(missing-symbol) | pid=N ppid=N rank=N local_rank=N "
            "trace=${SCRATCH}/t.ldscope\n"
            "  ldscope.python3_X | passed | pid=N ppid=N trace=${SCRATCH}/t.ldscope | system-out\n"
            "suite ${BIN}/true: tests 1 failures 0 errors 0\n"
            "  ldscope.true | passed | pid=N ppid=N trace=${SCRATCH}/t.ldscope\n");

  // report writes the same from the saved trace; --fail-on warning fails the NCCL
  // duplicate too (what fails the job shows as failed).
  const auto rep = RunCmd({LDSCOPE_BIN, "report", "--junit", dir + "/report.xml", trace});
  EXPECT_EQ(rep.code, 0) << rep.err;
  EXPECT_EQ(testing::ReadFile(dir + "/report.xml"), xml);
  const auto warn = RunCmd({LDSCOPE_BIN, "report", "--fail-on", "warning", "--junit",
                            dir + "/warn.xml", trace});
  EXPECT_EQ(warn.code, 3) << warn.err;
  const std::string back = ReadBack(dir, dir + "/warn.xml");
  EXPECT_NE(back.find("tests 4 failures 2 errors 0\n"), std::string::npos) << back;
  EXPECT_NE(back.find("| Failure(duplicate-library) |"), std::string::npos) << back;
}

// run --no-report --junit: the file, nothing on stderr; a damaged trace is an <error>;
// an unwritable file is status 2 with the reason.
TEST(Junit, NoReportDamagedTraceAndUnwritableFile) {
  const auto dir = testing::ScratchDir("junit_edges");
  const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--no-report", "-o", dir + "/t.ldscope",
                         "--junit", dir + "/t.xml", "--", "/bin/true"},
                        {}, kRankVars);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(ReadBack(dir, dir + "/t.xml"),
            "counts as stated: yes\ntests 1 failures 0 errors 0\n"
            "suite /usr/bin/true: tests 1 failures 0 errors 0\n"
            "  ldscope.true | passed | pid=N ppid=N trace=" + dir + "/t.ldscope\n");
  std::string bytes = testing::ReadFile(dir + "/t.ldscope");
  testing::WriteFile(dir + "/cut.ldscope", bytes.substr(0, bytes.size() - 3));
  const auto cut = RunCmd({LDSCOPE_BIN, "report", "--junit", dir + "/cut.xml", dir + "/cut.ldscope"});
  EXPECT_EQ(cut.code, 1) << cut.err;
  const std::string back = ReadBack(dir, dir + "/cut.xml");
  EXPECT_NE(back.find("suite ldscope traces: tests 1 failures 0 errors 1\n"
                      "  ldscope.trace | Error(damaged-trace) | \n"),
            std::string::npos) << back;
  const auto bad = RunCmd({LDSCOPE_BIN, "report", "--junit", dir + "/no/such/dir/x.xml",
                           dir + "/t.ldscope"});
  EXPECT_EQ(bad.code, 4);
  EXPECT_EQ(bad.err, "ldscope: the JUnit report: cannot write " + dir + "/no/such/dir/x.xml: directory " + dir +
                         "/no/such/dir: No such file or directory\n");
}

// A case is named by its command line and rank, never its pid: two runs of one command
// give the same names (CI history follows a test by name); the pid is a property.
TEST(Junit, CaseNamesAreStableAcrossRuns) {
  const auto dir = testing::ScratchDir("junit_stable");
  testing::WriteFile(dir + "/names.py",
                     "import sys\nfrom junitparser import JUnitXml\n"
                     "for s in JUnitXml.fromfile(sys.argv[1]):\n"
                     "    for c in s:\n        print(c.name)\n");
  std::vector<std::string> names;
  for (const char* run : {"a", "b"}) {
    const std::string xml = dir + "/" + run + ".xml";
    const auto r = RunCmd({LDSCOPE_BIN, "run", "-q", "--junit", xml, "-o", dir + "/" + run + ".ldscope", "--",
                           "/bin/sh", "-c", "/bin/true; /bin/true; RANK=3 /bin/true x"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto listed = RunCmd({"/usr/bin/python3", dir + "/names.py", xml});
    ASSERT_EQ(listed.code, 0) << listed.err;
    names.push_back(listed.out);
    EXPECT_NE(testing::ReadFile(xml).find("<property name=\"pid\" value=\""), std::string::npos);
  }
  EXPECT_EQ(names[0], names[1]);
  EXPECT_EQ(testing::Canonicalise(names[0]),
            "${SHELL} -c ${BIN}/true; ${BIN}/true; RANK=3 ${BIN}/true x\n"
            "${BIN}/true\n"
            "${BIN}/true #2\n"
            "${BIN}/true x (rank 3)\n");
}

// Names are byte strings: what XML cannot hold (control characters, invalid UTF-8,
// surrogates, U+FFFE) is written as \xNN, a tab and a newline as \t and \n (as every
// output escapes them); valid UTF-8 passes through.
TEST(Junit, EscapesWhatXmlForbids) {
  v1::Timeline t;
  auto* p = t.add_processes();
  p->set_pid(7);
  p->set_exe("/opt/a\"b");
  p->add_argv(std::string("x\x01y\x7f\xff \xed\xa0\x80 \xef\xbf\xbe \xc3\xa9 <&>\t\n"));
  const std::string xml = render::Junit(t, v1::Report(), {});
  EXPECT_NE(xml.find("<testsuite name=\"/opt/a&quot;b\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase name=\"x\\x01y\\x7f\\xff \\xed\\xa0\\x80 \\xef\\xbf\\xbe \xc3\xa9 "
                     "&lt;&amp;&gt;\\t\\n\" classname=\"ldscope.a&quot;b\""),
            std::string::npos)
      << xml;
}

}  // namespace
}  // namespace ldscope
