// The program whose build makes the tests' precompiled header
// (tests/CMakeLists.txt, swa_test_pch); never run.
int main() { return 0; }
