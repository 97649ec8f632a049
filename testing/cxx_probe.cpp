// Developer probe (testing/record_tokenizer.py --cxx builds and runs it): two orders llama.cpp's vocabulary
// loader inherits from libstdc++, printed for bankml.cxx._stl to reproduce.
//   cxx_probe map   < keys     : keys are (u32 length, bytes)*; prints the iteration order of the
//                                std::unordered_map<std::string, int> filled by m[key_i] = i
//   cxx_probe sort  < lengths  : whitespace-separated ints; prints std::sort of the indices with
//                                comp(a, b) = len[a] > len[b] (the special-token cache's comparator)
//   cxx_probe growth           : (size, bucket_count) each time a default map rehashes while growing
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "map")) {
        std::vector<std::string> keys;
        uint32_t len;
        while (fread(&len, 4, 1, stdin) == 1) {
            std::string s(len, '\0');
            if (len && fread(&s[0], 1, len, stdin) != len) return 1;
            keys.push_back(s);
        }
        std::unordered_map<std::string, int> m;
        for (size_t i = 0; i < keys.size(); i++) m[keys[i]] = (int) i;
        for (const auto &kv : m) printf("%d\n", kv.second);
    } else if (!strcmp(argv[1], "sort")) {
        std::vector<int> len;
        int x;
        while (scanf("%d", &x) == 1) len.push_back(x);
        std::vector<int> ids(len.size());
        for (size_t i = 0; i < ids.size(); i++) ids[i] = (int) i;
        std::sort(ids.begin(), ids.end(), [&](const int a, const int b) { return len[a] > len[b]; });
        for (int i : ids) printf("%d\n", i);
    } else if (!strcmp(argv[1], "growth")) {
        std::unordered_map<std::string, int> m;
        size_t last = m.bucket_count();
        for (int i = 0; i < (1 << 24); i++) {
            m[std::to_string(i)] = i;
            if (m.bucket_count() != last) { printf("%zu %zu\n", m.size(), m.bucket_count()); last = m.bucket_count(); }
        }
    } else {
        return 2;
    }
    return 0;
}
