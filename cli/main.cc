// The `kiln` command: parses flags and calls library code.
#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Kiln: an auto-tuner for tensor programs"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
