// perseus-watchdog executable (see perseus/runtime/watchdog.hpp).
#include "perseus/runtime/watchdog.hpp"

int main(int argc, char** argv) { return perseus::runtime::watchdog_main(argc, argv); }
