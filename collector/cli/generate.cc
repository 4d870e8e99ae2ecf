// See help.h: the man page and the shell completions, written from the CLI11 app that
// parses the arguments, so that they name exactly the commands and options there are.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/help.h"
#include "store/output_file.h"

namespace ldscope::cli {
namespace {

// The commands `ldscope help` lists (hidden ones have no group).
std::vector<const CLI::App*> Commands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (!sub->get_group().empty()) out.push_back(sub);
  return out;
}

// What an option is, for the three writers.
struct Opt {
  std::vector<std::string> names;  // "-o", "--output"
  bool takes_value = false;
  std::string value_name;            // "TEXT", "INT"
  std::vector<std::string> choices;  // CLI::IsMember's words
  std::string description;
};

std::vector<Opt> OptionsOf(const CLI::App* app) {
  std::vector<Opt> out;
  for (const CLI::Option* o : app->get_options({})) {
    if (!o->nonpositional() || o->get_group().empty()) continue;  // an empty group: hidden from people
    Opt opt;
    for (const auto& s : o->get_snames()) opt.names.push_back("-" + s);
    for (const auto& l : o->get_lnames()) opt.names.push_back("--" + l);
    opt.takes_value = o->get_expected_max() != 0;  // a flag expects none
    // "TEXT:{text,json}": the value's type, then the validators' words.
    std::string type = o->get_type_name();
    const auto brace = type.find(":{");
    if (brace != std::string::npos && type.back() == '}') {
      const std::string words = type.substr(brace + 2, type.size() - brace - 3);
      for (size_t p = 0; p <= words.size();) {
        const size_t comma = std::min(words.find(',', p), words.size());
        opt.choices.push_back(words.substr(p, comma - p));
        p = comma + 1;
      }
      type.resize(brace);
    }
    type = type.substr(0, type.find(':'));  // "INT:POSITIVE": the type
    opt.value_name = type.empty() ? "VALUE" : type;
    opt.description = o->get_description();
    out.push_back(std::move(opt));
  }
  return out;
}

struct Positional {
  std::string name;
  bool many = false;
  std::string description;
};

std::vector<Positional> PositionalsOf(const CLI::App* app) {
  std::vector<Positional> out;
  for (const CLI::Option* o : app->get_options({}))
    if (o->get_positional())
      out.push_back({o->get_name(true, false), o->get_items_expected_max() > 1, o->get_description()});
  return out;
}

// --- man(7) ---

// Text for a man page: backslashes as \e, a hyphen as \-, a line never starting with
// the control characters . and '.
std::string Roff(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  std::string lines;
  size_t start = 0;
  while (start <= out.size()) {
    const size_t nl = std::min(out.find('\n', start), out.size());
    std::string line = out.substr(start, nl - start);
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) line = "\\&" + line;
    lines += line;
    if (nl < out.size()) lines += "\n";
    start = nl + 1;
  }
  return lines;
}

std::string OptionsRoff(const CLI::App* app) {
  std::string out;
  for (const Positional& p : PositionalsOf(app))
    out += fmt::format(".TP\n.I {}{}\n{}\n", Roff(p.name), p.many ? " ..." : "", Roff(p.description));
  for (const Opt& o : OptionsOf(app)) {
    std::string head;
    for (const auto& n : o.names) head += (head.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", Roff(n));
    if (o.takes_value)
      head += " \\fI" + Roff(o.choices.empty() ? o.value_name : fmt::format("{}", fmt::join(o.choices, "|"))) + "\\fR";
    out += fmt::format(".TP\n{}\n{}\n", head, Roff(o.description));
  }
  return out;
}

std::string Man(const CLI::App& app) {
  std::string out = fmt::format(".TH LDSCOPE 1 \"\" \"ldscope {}\" \"User Commands\"\n", LDSCOPE_VERSION);
  out += ".SH NAME\nldscope \\- " + Roff(app.get_description().substr(app.get_description().find(": ") + 2)) + "\n";
  out += ".SH SYNOPSIS\n.B ldscope\n.I COMMAND\n[\\fIOPTIONS\\fR] [\\fIARGS\\fR]\n";
  out += ".br\n.B ldscope help\n[\\fICOMMAND\\fR]\n";
  out += ".SH DESCRIPTION\n" + Roff(app.get_description().substr(app.get_description().find(": ") + 2)) +
         "\n.PP\nEach command is described below; \\fBldscope help\\fR \\fICOMMAND\\fR prints the same.\n";
  out += ".SH OPTIONS\n" + OptionsRoff(&app);
  out += ".SH COMMANDS\n";
  for (const CLI::App* sub : Commands(app)) {
    out += fmt::format(".SS \"ldscope {}\"\n{}\n", Roff(sub->get_name()), Roff(sub->get_description()));
    const std::string footer = sub->get_footer();
    if (!footer.empty() && footer != app.get_footer()) out += ".PP\n" + Roff(footer) + "\n";
    out += OptionsRoff(sub);
  }
  out += ".SH EXIT STATUS\n" + Roff(app.get_footer().substr(app.get_footer().find(": ") + 2)) + "\n";
  out += ".SH SEE ALSO\n.BR ld.so (8),\n.BR rtld\\-audit (7)\n";
  return out;
}

// --- bash ---

std::string Words(const std::vector<std::string>& w) { return fmt::format("{}", fmt::join(w, " ")); }

std::string Bash(const CLI::App& app) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : Commands(app)) commands.push_back(sub->get_name());
  std::string options_case, values_case;
  std::vector<std::string> run_values;  // run's options that take a value
  for (const CLI::App* sub : Commands(app)) {
    std::vector<std::string> names;
    for (const Opt& o : OptionsOf(sub)) {
      names.insert(names.end(), o.names.begin(), o.names.end());
      if (!o.takes_value) continue;
      if (sub->get_name() == "run") run_values.insert(run_values.end(), o.names.begin(), o.names.end());
      // A value: its words, else a file name (bash's default completion).
      const std::string what = o.choices.empty() ? "" : Words(o.choices);
      for (const auto& n : o.names) values_case += fmt::format("    {}:{}) words='{}' ;;\n", sub->get_name(), n, what);
    }
    options_case += fmt::format("    {}) words='{}' ;;\n", sub->get_name(), Words(names));
  }
  return fmt::format(
      R"(# bash completion for ldscope (written by `ldscope generate bash`).
_ldscope() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} command="" i words
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${{COMP_WORDS[i]}} in
      -*) ;;
      *) command=${{COMP_WORDS[i]}}; break ;;
    esac
  done
  if [[ -z $command ]]; then
    COMPREPLY=($(compgen -W '{} --help --version' -- "$cur"))
    return
  fi
  # After `run`'s command (or its --), the command's own words: files.
  if [[ $command == run ]]; then
    for ((i = i + 1; i < COMP_CWORD; i++)); do
      case ${{COMP_WORDS[i]}} in
        --) return ;;
        {}) ((i++)) ;;
        -*) ;;
        *) return ;;
      esac
    done
  fi
  if [[ $command == help ]]; then
    COMPREPLY=($(compgen -W '{}' -- "$cur"))
    return
  fi
  words=unset
  case $command:$prev in
{}  esac
  if [[ $words != unset ]]; then
    # A value: its words, or (none) bash's file names.
    [[ -n $words ]] && COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    case $command in
{}    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}}
complete -o bashdefault -o default -F _ldscope ldscope
)",
      Words(commands), fmt::join(run_values, "|"), Words(commands), values_case, options_case);
}

// --- zsh ---

// Text inside a zsh _arguments spec, itself in '…': no [ ] : or ' of its own.
std::string ZshText(const std::string& s) {
  std::string first = s.substr(0, s.find(". "));
  std::string out;
  for (char c : first) {
    if (c == '[')
      out += '(';
    else if (c == ']')
      out += ')';
    else if (c == ':')
      out += "\\:";
    else if (c == '\'')
      out += "'\\''";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string Zsh(const CLI::App& app) {
  std::string commands, cases;
  for (const CLI::App* sub : Commands(app)) {
    commands += fmt::format("    '{}:{}'\n", sub->get_name(), ZshText(sub->get_description()));
    std::string specs;
    for (const Opt& o : OptionsOf(sub)) {
      std::string value;
      if (o.takes_value)
        value = o.choices.empty() ? ":" + ZshText(o.value_name) + ":_files"
                                  : ":" + ZshText(o.value_name) + ":(" + Words(o.choices) + ")";
      const std::string exclusive = o.names.size() > 1 ? "(" + Words(o.names) + ")" : "";
      for (const auto& n : o.names)
        specs += fmt::format("        '{}{}[{}]{}' \\\n", exclusive, n, ZshText(o.description), value);
    }
    const std::string rest = sub->get_name() == "run"    ? "'*::command:_normal'"
                             : sub->get_name() == "help" ? "'1:command:(" +
                                                               [&] {
                                                                 std::vector<std::string> names;
                                                                 for (const CLI::App* c : Commands(app))
                                                                   names.push_back(c->get_name());
                                                                 return Words(names);
                                                               }() +
                                                               ")'"
                                                         : "'*:file:_files'";
    cases +=
        fmt::format("      {})\n        _arguments -s \\\n{}        {}\n        ;;\n", sub->get_name(), specs, rest);
  }
  return fmt::format(R"(#compdef ldscope
# zsh completion for ldscope (written by `ldscope generate zsh`).
_ldscope() {{
  local -a commands
  commands=(
{}  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'ldscope command' commands
    return
  fi
  local command=${{words[2]}}
  shift words
  (( CURRENT-- ))
  case $command in
{}  esac
}}
_ldscope "$@"
)",
                     commands, cases);
}

}  // namespace

CLI::App* AddGenerate(CLI::App& app, GenerateOptions& opt) {
  CLI::App* gen = app.add_subcommand("generate", "Write the man page or a shell's completion");
  gen->group("");  // not for users: the build writes what the packages install
  gen->add_option("what", opt.what, "man, bash or zsh")->required()->check(CLI::IsMember({"man", "bash", "zsh"}));
  gen->add_option("-o,--output", opt.output, "The file (default: standard output)");
  return gen;
}

int Generate(const CLI::App& app, const GenerateOptions& opt) {
  const std::string text = opt.what == "man" ? Man(app) : opt.what == "bash" ? Bash(app) : Zsh(app);
  if (opt.output.empty()) return Print(stdout, text) ? kOk : kWriteFailed;
  if (Status s = store::WriteTextFile(opt.output, text); !s.ok()) {
    Complain(s.error());
    return kWriteFailed;
  }
  return kOk;
}

}  // namespace ldscope::cli
