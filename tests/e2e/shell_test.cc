// The man page and the bash and zsh completions the build writes (build/share/, what
// the packages install): rendered by man(1) without warnings, loaded by bash and
// zsh, and naming every command and option `ldscope help` names, so they cannot drift
// from the binary.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "support/test_support.h"

namespace ldscope {
namespace {

using testing::RunCmd;

const std::string kMan = std::string(SHARE_DIR) + "/man/man1/ldscope.1";
const std::string kBash = std::string(SHARE_DIR) + "/bash-completion/completions/ldscope";
const std::string kZsh = std::string(SHARE_DIR) + "/zsh/vendor-completions/_ldscope";

// The commands `ldscope help` lists.
std::vector<std::string> Commands() {
  const auto help = RunCmd({LDSCOPE_BIN, "help"}, {"COLUMNS=200"});
  std::vector<std::string> out;
  const size_t at = help.out.find("Subcommands:\n");
  std::istringstream lines(help.out.substr(at + 13));
  static const std::regex command("^  ([a-z]+) ");
  std::smatch m;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, m, command)) out.push_back(m[1]);
  return out;
}

// The options `ldscope COMMAND --help` lists ("-o", "--output", ...).
std::set<std::string> OptionsOf(const std::string& command) {
  const auto help = RunCmd({LDSCOPE_BIN, command, "--help"}, {"COLUMNS=200"});
  std::set<std::string> out;
  std::istringstream lines(help.out.substr(help.out.find("Options:\n")));
  static const std::regex names("^  (-[-A-Za-z0-9,]+)");
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, m, names)) continue;
    std::istringstream each(m[1]);
    for (std::string n; std::getline(each, n, ',');) out.insert(n);
  }
  return out;
}

std::set<std::string> Lines(const std::string& s) {
  std::set<std::string> out;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.insert(line);
  return out;
}

TEST(Shell, TheCommandsAndOptionsAreRead) {
  const auto commands = Commands();
  EXPECT_EQ(commands, (std::vector<std::string>{"run", "collect", "show", "snapshot", "hook", "report", "diff", "lock",
                                                "check", "export", "imports", "help"}));
  EXPECT_EQ(OptionsOf("report"),
            (std::set<std::string>{"-h", "--help", "--format", "-o", "--output", "--color", "--fail-on",
                                   "--across-hosts-only", "--junit", "--github", "--perf"}));
}

// What the build installs is what the binary writes.
TEST(Shell, TheFilesAreTheBinarys) {
  for (const auto& [what, file] : {std::pair{"man", kMan}, {"bash", kBash}, {"zsh", kZsh}}) {
    const auto r = RunCmd({LDSCOPE_BIN, "generate", what});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, testing::ReadFile(file)) << what;
  }
  // Not a command users see.
  EXPECT_EQ(RunCmd({LDSCOPE_BIN, "help"}).out.find("generate"), std::string::npos);
}

TEST(Shell, ManPageRendersWithoutWarnings) {
  const auto man = RunCmd({"/usr/bin/man", "--warnings", "-l", kMan},
                          {"MANWIDTH=80", "LC_ALL=C.UTF-8", "MANPAGER=cat", "PAGER=cat"});
  EXPECT_EQ(man.code, 0);
  EXPECT_EQ(man.err, "");
  const auto groff = RunCmd({"/usr/bin/groff", "-man", "-ww", "-z", kMan});
  EXPECT_EQ(groff.code, 0);
  EXPECT_EQ(groff.err, "");
  // Every command has its section, with every option of its --help (man's hyphens
  // as typed: LC_ALL=C.UTF-8 renders \- as -).
  const std::string& text = man.out;
  ASSERT_NE(text.find("LDSCOPE(1)"), std::string::npos) << text;
  for (const auto& c : Commands()) {
    const size_t at = text.find("\n   ldscope " + c + "\n");
    ASSERT_NE(at, std::string::npos) << c << "\n" << text;
    const size_t end = text.find("\n   ldscope ", at + 1);
    const std::string section = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const auto& o : OptionsOf(c))
      EXPECT_TRUE(std::regex_search(section, std::regex("\n       (.*, )?" + o + "[ ,\n]"))) << c << " " << o;
  }
  EXPECT_NE(text.find("       --format text|json\n"), std::string::npos);
  EXPECT_NE(text.find("       -j, --jobs INT\n"), std::string::npos);
  EXPECT_NE(text.find("EXIT STATUS\n"), std::string::npos);
}

// bash with the completion loaded: COMPREPLY for the words typed so far (the last one
// being completed), one per line.
testing::Proc Complete(const std::vector<std::string>& words) {
  std::string array;
  for (const auto& w : words) array += " '" + w + "'";
  const std::string script = "source '" + kBash + "'; COMP_WORDS=(" + array +
                             "); COMP_CWORD=" + std::to_string(words.size() - 1) +
                             "; COMP_LINE=\"${COMP_WORDS[*]}\"; COMP_POINT=${#COMP_LINE}; _ldscope; "
                             "printf '%s\\n' \"${COMPREPLY[@]}\"";
  return RunCmd({"/bin/bash", "--norc", "--noprofile", "-c", script});
}

std::string Completed(const std::vector<std::string>& words) {
  const auto r = Complete(words);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

TEST(Shell, BashCompletesCommandsAndOptions) {
  const auto loaded =
      RunCmd({"/bin/bash", "--norc", "--noprofile", "-c", "source '" + kBash + "'; complete -p ldscope"});
  EXPECT_EQ(loaded.out, "complete -o bashdefault -o default -F _ldscope ldscope\n");
  EXPECT_EQ(loaded.err, "");

  std::string all;
  for (const auto& c : Commands()) all += c + "\n";
  EXPECT_EQ(Completed({"ldscope", ""}), all + "--help\n--version\n");
  EXPECT_EQ(Completed({"ldscope", "re"}), "report\n");
  EXPECT_EQ(Completed({"ldscope", "help", "r"}), "run\nreport\n");
  // Each command's options: those of its --help, all of them.
  for (const auto& c : Commands()) {
    if (c == "help") continue;
    std::set<std::string> want = OptionsOf(c);
    EXPECT_EQ(Lines(Completed({"ldscope", c, "-"})), want) << c;
  }
  EXPECT_EQ(Completed({"ldscope", "report", "--f"}), "--format\n--fail-on\n");
  EXPECT_EQ(Completed({"ldscope", "report", "trace.ldscope", "--col"}), "--color\n");
  // An option's value: its words, else nothing (bash then completes file names).
  EXPECT_EQ(Completed({"ldscope", "report", "--format", ""}), "text\njson\n");
  EXPECT_EQ(Completed({"ldscope", "run", "--color", "a"}), "auto\nalways\n");
  EXPECT_EQ(Completed({"ldscope", "report", "-o", ""}), "\n");
  // run's command and its arguments are the command's, not ldscope's.
  EXPECT_EQ(Completed({"ldscope", "run", "-o", "t.ldscope", "python3", "--"}), "\n");
  EXPECT_EQ(Completed({"ldscope", "run", "--", "python3", "-"}), "\n");
  EXPECT_EQ(Completed({"ldscope", "run", "-q", "--no-r"}), "--no-report\n");
}

// zsh: the file is a completion function zsh loads (syntax, compinit's #compdef),
// and, with zsh's _describe and _arguments standing in, it offers the commands first
// and then each command's options.
TEST(Shell, ZshCompletionLoads) {
  const auto syntax = RunCmd({"/usr/bin/zsh", "-n", kZsh});
  EXPECT_EQ(syntax.code, 0) << syntax.err;
  EXPECT_EQ(syntax.err, "");
  const std::string dir = testing::ScratchDir("shell_zsh");
  const std::string compdef = "fpath=('" + std::string(SHARE_DIR) +
                              "/zsh/vendor-completions' $fpath); autoload -U compinit; compinit -u -d '" + dir +
                              "/zcompdump'; print -r -- $_comps[ldscope]";
  const auto loaded = RunCmd({"/usr/bin/zsh", "-f", "-c", compdef});
  EXPECT_EQ(loaded.out, "_ldscope\n") << loaded.err;

  auto offered = [&](const std::string& words, int current) {
    const std::string script =
        "_describe() { shift 3; print -rl -- ${(P)1} }; _arguments() { print -rl -- \"$@\" }; "
        "words=(" +
        words + "); CURRENT=" + std::to_string(current) + "; source '" + kZsh + "'";
    const auto r = RunCmd({"/usr/bin/zsh", "-f", "-c", script});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return r.out;
  };
  const std::string commands = offered("ldscope ''", 2);
  std::string names;
  std::istringstream lines(commands);
  for (std::string line; std::getline(lines, line);) names += line.substr(0, line.find(':')) + "\n";
  std::string all;
  for (const auto& c : Commands()) all += c + "\n";
  EXPECT_EQ(names, all);
  EXPECT_NE(commands.find("report:Analyse traces (files or LDSCOPE_DIR directories)\\: missing libraries"),
            std::string::npos)
      << commands;
  for (const auto& c : Commands()) {
    if (c == "help") continue;
    const std::string specs = offered("ldscope " + c + " -", 3);
    std::set<std::string> got;
    static const std::regex name("^(\\([^)]*\\))?(-[-A-Za-z0-9]+)\\[");
    std::smatch m;
    std::istringstream each(specs);
    for (std::string line; std::getline(each, line);)
      if (std::regex_search(line, m, name)) got.insert(m[2]);
    EXPECT_EQ(got, OptionsOf(c)) << c << "\n" << specs;
  }
  const std::string report = offered("ldscope report --format", 3);
  EXPECT_NE(report.find("--format[text or json (proto3 JSON mapping)]:TEXT:(text json)\n"), std::string::npos)
      << report;
  EXPECT_NE(report.find("(-o --output)-o[Write the report to this file]:TEXT:_files\n"), std::string::npos) << report;
}

}  // namespace
}  // namespace ldscope
