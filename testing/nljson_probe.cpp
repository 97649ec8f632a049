// Developer probe (testing/record_nljson_floats.py builds and runs it against the b11192 sdist's
// vendor/nlohmann/json.hpp): reads little-endian doubles on stdin and prints json(x).dump() of each, one a line,
// as llama-server writes a float into its answers.
#include <cstdio>
#include <nlohmann/json.hpp>

int main() {
    double x;
    while (fread(&x, sizeof x, 1, stdin) == 1) {
        nlohmann::ordered_json j = x;
        std::string s = j.dump();
        fputs(s.c_str(), stdout);
        fputc('\n', stdout);
    }
    return 0;
}
