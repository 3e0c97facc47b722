// The doctest runner shared by the test executables (the test files themselves define no main).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
