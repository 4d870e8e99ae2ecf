// See help.h.
#include "cli/help.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace ldscope::cli {
namespace {

size_t TerminalWidth() {
  if (const char* c = std::getenv("COLUMNS"); c != nullptr && std::atoi(c) >= 40)
    return static_cast<size_t>(std::atoi(c));
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
  return 100;
}

// text in lines of at most width columns, broken at spaces (a longer word stands alone).
std::string Wrap(const std::string& text, size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() : width_(TerminalWidth()) { column_width(30); }
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    // "--no-report{false}": the value a false flag sets is CLI11's notation, not ours.
    return std::regex_replace(CLI::Formatter::make_option_name(opt, positional), std::regex(R"(\{[^}]*\})"), "");
  }
  std::string make_option_desc(const CLI::Option* opt) const override { return Body(opt->get_description()); }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true), Body(sub->get_description()), get_column_width());
    return out.str();
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string d = app->get_description();
    return d.empty() ? "" : Wrap(d, width_) + "\n";
  }
  std::string make_footer(const CLI::App* app) const override {
    const std::string f = app->get_footer();
    return f.empty() ? "" : "\n" + Wrap(f, width_) + "\n";
  }

 private:
  // A description in the right column.
  std::string Body(const std::string& d) const {
    const size_t room = width_ > get_column_width() + 20 ? width_ - get_column_width() : 20;
    return Wrap(d, room);
  }
  size_t width_;
};

}  // namespace

void UseWrappingHelp(CLI::App& app) {
  auto f = std::make_shared<WrappingFormatter>();
  app.formatter(f);
  // Every level: `hook install` is a sub-command's sub-command.
  std::vector<CLI::App*> todo = app.get_subcommands({});
  while (!todo.empty()) {
    CLI::App* sub = todo.back();
    todo.pop_back();
    sub->formatter(f);
    for (CLI::App* inner : sub->get_subcommands({})) todo.push_back(inner);
  }
}

CLI::App* AddHelp(CLI::App& app, std::string& command) {
  CLI::App* help = app.add_subcommand("help", "Print this help, or a command's (ldscope help run)");
  help->add_option("command", command, "A command");
  return help;
}

int PrintHelpCommand(CLI::App& app, const std::string& command) {
  // The formatter directly: App::help() on a parsed app prints the selected
  // subcommand's help (this one's).
  const auto print = [&](const CLI::App* which, const std::string& name) {
    const std::string text = app.get_formatter()->make_help(which, name, CLI::AppFormatMode::Normal);
    return std::fputs(text.c_str(), stdout) >= 0 ? kOk : kWriteFailed;
  };
  if (command.empty()) return print(&app, app.get_name());
  for (CLI::App* sub : app.get_subcommands({}))
    if (sub->get_name() == command) return print(sub, app.get_name() + " " + command);
  Complain("help: no command '" + command + "' (ldscope help lists them)");
  return kUsage;
}

}  // namespace ldscope::cli
