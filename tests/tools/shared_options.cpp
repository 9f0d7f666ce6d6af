// tests/tools/shared_options.cpp: prints the shared option table of lrt's programs
// (examples/tools/cli/args.hpp, tool::shared_options) for tools.shared_options, one option per
// line: NAME<TAB>PROGRAMS<TAB>the option's usage line as tool::Args renders it. The test then
// runs each program named with --help and requires that line in its usage, and that no other
// program declares the option with a help of its own under the same name and placeholder.
#include <cstdio>
#include <string>

#include "cli/args.hpp"

int main() {
  for (const tool::SharedOption& o : tool::shared_options) {
    // The usage line of the option alone: Args renders it after the "options:" header.
    tool::Args a(std::string(o.programs).substr(0, std::string(o.programs).find(' ')), "");
    a.shared(o.name);
    const std::string u = a.usage();
    const std::size_t from = u.find("options:\n") + 9;
    const std::string line = u.substr(from, u.find("\n  --help ", from) - from);
    if (line.find('\t') != std::string::npos || line.find('\n') != std::string::npos) {
      std::fprintf(stderr, "shared_options: --%s's usage spans lines or holds a tab\n", o.name);
      return 1;
    }
    std::printf("%s\t%s\t%s\n", o.name, o.programs, line.c_str());
  }
  return 0;
}
