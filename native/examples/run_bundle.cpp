// run_bundle: open a pipec bundle, give constants new values (NAME=VALUE: `true`, `false`, a float
// when it has a `.` or an exponent, else an integer), replay its step N times, and print the
// mapped diagnostics as piperun does ("label=value", values to 4 significant digits).
//   pipec build pipelines/rl_step.pipe -o rl_step.bundle --arch sm_90
//   run_bundle rl_step.bundle 1000 GAMMA=0.95
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "pipec.hpp"

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s BUNDLE [STEPS [NAME=VALUE...]]\n", argv[0]);
        return 2;
    }
    std::uint64_t steps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100;
    try {
        auto pipeline = pipec::pipeline::open(argv[1]);
        std::vector<std::pair<std::string, pipec_value>> values;
        for (int i = 3; i < argc; i++) {
            std::string assignment = argv[i], name = assignment.substr(0, assignment.find('=')),
                        text = assignment.substr(name.size() + 1);
            values.emplace_back(name, text == "true" || text == "false" ? pipec::boolean(text == "true")
                                      : text.find_first_of(".eE") != std::string::npos ? pipec::floating(std::stod(text))
                                      : pipec::integer(std::stoll(text)));
        }
        if (!values.empty()) pipeline.update_constants(values);
        auto start = std::chrono::steady_clock::now();
        pipeline.step(steps);
        pipeline.synchronize();
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("run_bundle: ran %llu steps in %.3f s: %.2f steps/s (graph)\n", (unsigned long long)steps, wall,
                    wall > 0 ? steps / wall : 0.0);
        std::string line;
        for (const auto &[label, value] : pipeline.diags()) {
            char text[64];
            if (std::isfinite(value)) std::snprintf(text, sizeof text, "%.4g", value);
            else std::snprintf(text, sizeof text, "%s", std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
            line += (line.empty() ? "" : " ") + label + "=" + text;
        }
        if (!line.empty()) std::printf("run_bundle: %s\n", line.c_str());
    } catch (const pipec::error &e) {
        std::fprintf(stderr, "run_bundle: %s\n", e.what());
        return 1;
    }
    return 0;
}
