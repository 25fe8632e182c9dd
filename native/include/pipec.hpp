// pipec.hpp: a small RAII wrapper over pipec.h (C++17). A failed call throws pipec::error,
// which carries the status and pipec_last_error()'s one line; the pipeline closes itself.
#ifndef PIPEC_HPP
#define PIPEC_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pipec.h"

namespace pipec {

class error : public std::runtime_error {
public:
    error(pipec_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    pipec_status status() const noexcept { return status_; }

private:
    pipec_status status_;
};

inline void check(pipec_status status) {
    if (status != PIPEC_OK) throw error(status, pipec_last_error());
}

// A constant's value for pipeline::update_constants, of the kind `-D` would give it: 3, 3.0 and
// true compute differently.
inline pipec_value integer(std::int64_t i) { pipec_value v{}; v.kind = PIPEC_VALUE_INT; v.as.i = i; return v; }
inline pipec_value unsigned_integer(std::uint64_t u) { pipec_value v{}; v.kind = PIPEC_VALUE_UINT; v.as.u = u; return v; }
inline pipec_value floating(double f) { pipec_value v{}; v.kind = PIPEC_VALUE_FLOAT; v.as.f = f; return v; }
inline pipec_value boolean(bool b) { pipec_value v{}; v.kind = PIPEC_VALUE_BOOL; v.as.b = b; return v; }

class pipeline {
public:
    // Opens a bundle folder; `options` as pipec_open_dir takes them (nullptr: defaults).
    static pipeline open(const std::string &dir, const pipec_options *options = nullptr) {
        pipec_pipeline *p = nullptr;
        check(pipec_open_dir(dir.c_str(), options, &p));
        return pipeline(p);
    }

    pipeline(pipeline &&other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
    pipeline &operator=(pipeline &&other) noexcept {
        if (this != &other) {
            pipec_close(p_);
            p_ = std::exchange(other.p_, nullptr);
        }
        return *this;
    }
    pipeline(const pipeline &) = delete;
    pipeline &operator=(const pipeline &) = delete;
    ~pipeline() { pipec_close(p_); }

    void step(std::uint64_t n = 1) { check(pipec_step(p_, n)); }
    void launch(CUstream stream, std::uint64_t n = 1) { check(pipec_launch(p_, stream, n)); }
    void run_eager(std::uint64_t n = 1) { check(pipec_run_eager(p_, n)); }
    void synchronize() { check(pipec_synchronize(p_)); }
    CUstream stream() const noexcept { return pipec_stream(p_); }

    double diag(const std::string &label) const {
        double value = 0;
        check(pipec_read_diag(p_, label.c_str(), &value));
        return value;
    }

    // Every labelled diagnostic, in the plan's order, as piperun prints them.
    std::vector<std::pair<std::string, double>> diags() const {
        std::vector<std::pair<std::string, double>> out;
        for (size_t i = 0; i < pipec_diag_count(p_); i++) {
            const char *label = nullptr;
            double value = 0;
            check(pipec_diag_at(p_, i, &label, &value));
            out.emplace_back(label, value);
        }
        return out;
    }

    std::vector<unsigned char> read(const std::string &buffer) {
        size_t bytes = 0;
        check(pipec_buffer(p_, buffer.c_str(), nullptr, &bytes, nullptr));
        std::vector<unsigned char> out(bytes);
        check(pipec_read_buffer(p_, buffer.c_str(), out.data(), bytes));
        return out;
    }

    std::vector<std::string> buffers() const {
        std::vector<std::string> out;
        for (size_t i = 0; i < pipec_buffer_count(p_); i++) out.emplace_back(pipec_buffer_name(p_, i));
        return out;
    }

    pipec_verify_report verify(std::uint64_t steps) {
        pipec_verify_report report{};
        report.version = PIPEC_OPTIONS_VERSION;
        check(pipec_verify(p_, steps, &report));
        return report;
    }

    // New values for constants, all or nothing, through the plan's live-update record; the count
    // of kernel nodes changed.
    std::size_t update_constants(const std::vector<std::pair<std::string, pipec_value>> &values) {
        std::vector<const char *> names;
        std::vector<pipec_value> raw;
        for (const auto &[name, value] : values) names.push_back(name.c_str()), raw.push_back(value);
        std::size_t changed = 0;
        check(pipec_update_constants(p_, names.data(), raw.data(), raw.size(), &changed));
        return changed;
    }

    // Why a constant cannot change in place ("reaches a buffer's dimension at ..."), "" when it can.
    std::string structural(const std::string &constant) {
        const char *why = nullptr;
        check(pipec_constant(p_, constant.c_str(), nullptr, &why));
        return why ? why : "";
    }

    void save_state(const std::string &dir, std::uint64_t steps) { check(pipec_save_state(p_, dir.c_str(), steps)); }
    void load_state(const std::string &dir) { check(pipec_load_state(p_, dir.c_str())); }

    // The step's nodes added into the host's graph after `deps`; returns the node that follows them.
    CUgraphNode add_to_graph(CUgraph host, const std::vector<CUgraphNode> &deps) {
        CUgraphNode last = nullptr;
        check(pipec_add_to_graph(p_, host, deps.data(), deps.size(), &last));
        return last;
    }

    pipec_pipeline *get() const noexcept { return p_; }

private:
    explicit pipeline(pipec_pipeline *p) : p_(p) {}
    pipec_pipeline *p_;
};

}  // namespace pipec

#endif  // PIPEC_HPP
